r"""Why the main job's pretraining did not pay off: one candidate cause changed at a time.

Each candidate is a pretrained BERT-Tiny (configs/tiny.py, the main job's 1,500 steps on the
prepared corpus) that differs from the earlier main job (BERT-Tiny, BERT's vocabulary) in one choice; each is
fine-tuned on 8,000 SST-2 sentences with the main job's recipe (seq 64, lr 5e-4, 3 epochs;
the subset's seed is the run's seed) from its pretrained weights and, as its baseline, from
random weights of the same shape and vocabulary (config.random_init). Seeds 0, 1, 2 give
the spread; scored on SST-2 dev. Candidates (MODELS):

  wp30k   the earlier main job: BERT's released 30,522-piece WordPiece vocabulary, most
          of whose rows the tiny model never sees in pretraining (and whose 30,522-way
          MLM softmax is most of a tiny step's FLOPs);
  wp8k    the same run with a WordPiece vocabulary of 8,065 pieces learned from the
          pretraining corpus (text/learn_vocab.py);
  wp8k3k  wp8k for 3,000 steps: its steps are ~2.3x cheaper than wp30k's (the 8,065-way
          MLM softmax), so this is about the same pretraining wall time as wp30k;
  mask30  wp8k masking 30% of the tokens (40 predictions a row) instead of 15% (20);
  mask45  wp8k masking 45% (58 predictions a row);
  mlmonly30  mask30 without NSP: DOC-SENTENCES rows (one segment), MLM the only loss;
  movies30   mask30 pretrained on the movie reviews only (the domain of SST-2; NLTK's
          movie_reviews, 1.5 M words, ~3 passes in 1,500 steps).
Fine-tuning recipes (RECIPES) change the fine-tuning of a candidate, both inits alike:
  NAME-lr1e-4    the main job's recipe at learning rate 1e-4 instead of 5e-4;
  NAME-mean      the classifier reads the mean of the last layer over the real tokens
                 (config.classifier_pooling=mean) instead of the pooled [CLS].

  python -m experiments.run payoff_causes        # PREPARE pretrains each candidate first
  python -m experiments.report                   # the table on experiments/README.md
"""
from experiments import sweeps
from experiments.sweeps import pretraining_payoff

VOCAB = "runs/corpus/vocab-8k.txt"
MOVIES = "runs/corpus/movies.txt"
MASK30 = "--config.data.masked_lm_prob=0.3 --config.data.max_predictions_per_seq=40"
# Candidate -> (its pretraining workdir, the command that makes it).
MODELS = {
    "wp30k": ("runs/payoff/wp30k",
              "python -m bert_jax.train --config=configs/tiny.py --workdir=runs/payoff/wp30k"),
    "wp8k": ("runs/payoff/wp8k",
             f"python -m bert_jax.train --config=configs/tiny.py:vocab={VOCAB} "
             "--workdir=runs/payoff/wp8k"),
    "wp8k3k": ("runs/payoff/wp8k3k",
               f"python -m bert_jax.train --config=configs/tiny.py:vocab={VOCAB} "
               "--config.num_train_steps=3000 --workdir=runs/payoff/wp8k3k"),
    "mask30": ("runs/payoff/wp8k_mask30",
               f"python -m bert_jax.train --config=configs/tiny.py:vocab={VOCAB} {MASK30} "
               "--workdir=runs/payoff/wp8k_mask30"),
    "mask45": ("runs/payoff/wp8k_mask45",
               f"python -m bert_jax.train --config=configs/tiny.py:vocab={VOCAB} "
               "--config.data.masked_lm_prob=0.45 --config.data.max_predictions_per_seq=58 "
               "--workdir=runs/payoff/wp8k_mask45"),
    "mlmonly30": ("runs/payoff/wp8k_mask30_nonsp",
                  f"python -m bert_jax.train --config=configs/tiny.py:vocab={VOCAB} {MASK30} "
                  "--config.data.example_builder=doc_sentences --config.objectives=mlm "
                  "--workdir=runs/payoff/wp8k_mask30_nonsp"),
    "movies30": ("runs/payoff/movies_mask30",
                 f"python -m bert_jax.train --config=configs/tiny.py:corpus={MOVIES},"
                 f"vocab={VOCAB} {MASK30} --workdir=runs/payoff/movies_mask30"),
}
PREPARE = (
    ("runs/corpus/pretrain.txt",
     "python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt"),
    (VOCAB, "python -m bert_jax.text.learn_vocab --input=runs/corpus/pretrain.txt "
            f"--vocab_size=8192 --output={VOCAB}"),
    (MOVIES, "python -m bert_jax.text.prepare --source=nltk_corpora/movie_reviews.zip "
             f"--output={MOVIES}"),
) + tuple((f"{workdir}/eval_results.json", cmd) for workdir, cmd in MODELS.values())
# Recipe suffix -> fine-tuning overrides on top of the main job's recipe.
RECIPES = {"": {}, "-lr1e-4": {"optim.learning_rate": "1e-4"},
           "-mean": {"classifier_pooling": "mean"}}
# The (candidate, recipe) pairs the sweep runs.
PAIRS = (("wp30k", ""), ("wp8k", ""), ("wp8k3k", ""), ("wp8k", "-lr1e-4"),
         ("mask30", ""), ("mask45", ""), ("movies30", ""), ("wp8k", "-mean"),
         ("mask30", "-mean"), ("mlmonly30", "-mean"))
# A candidate whose random init is another's (same shape and vocabulary, same seeds: the
# same weights) is compared with that one's random-init runs instead of repeating them.
SAME_RANDOM = {name: "wp8k" for name in ("wp8k3k", "mask30", "mask45", "mlmonly30", "movies30")}
METRICS = {"eval_results.json": ("step", "eval_accuracy", "train_examples_per_sec")}
SEEDS = (0, 1, 2)
INITS = ("pretrained", "random")


def get_sweep():
  return {f"{model}{recipe}_{init}_s{seed}": {
      "config": "configs/glue.py:dataset=sst2,train_examples=8000",
      "overrides": {"init_from": MODELS[model][0], "random_init": init == "random",
                    "data.max_seq_length": 64, "optim.learning_rate": "5e-4",
                    "seed": seed, "data.seed": seed, **RECIPES[recipe], **sweeps.PADDED}}
      for model, recipe in PAIRS for init in INITS for seed in SEEDS
      if not (init == "random" and model in SAME_RANDOM)}


def summary(rows):
  """{(model, init): (mean, min, max, seeds)} of SST-2 dev accuracy."""
  groups = {}
  for row in rows:
    model, init, _ = row["run"].split("_")
    groups.setdefault((model, init), []).append(row["metrics"]["eval_accuracy"])
  return {key: (sum(v) / len(v), min(v), max(v), len(v)) for key, v in groups.items()}


COLUMNS = (
    ("run", lambda row: row["run"]),
    ("SST-2 dev acc (%)", lambda row: f"{100 * row['metrics']['eval_accuracy']:.2f}"),
)


def render(rows, plots_dir) -> str:
  """The results page's section: pretrained vs random init per candidate."""
  del plots_dir  # a table only
  stats = summary(rows)
  lines = ["| candidate | pretrained here | random init | gap | gap vs seeds |",
           "|---|---|---|---|---|"]
  cell = lambda s: f"{100 * s[0]:.2f} [{100 * s[1]:.2f}, {100 * s[2]:.2f}]"  # noqa: E731
  for model, recipe in PAIRS:
    pre = stats.get((model + recipe, "pretrained"))
    rnd = stats.get((SAME_RANDOM.get(model, model) + recipe, "random"))
    if pre and rnd:
      lines.append(f"| {model + recipe} | {cell(pre)} | {cell(rnd)} | {100 * (pre[0] - rnd[0]):+.2f} | "
                   f"{pretraining_payoff.gap_verdict(pre, rnd)} |")
  return "\n".join(lines)
