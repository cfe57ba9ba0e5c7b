r"""Does pretraining here pay off? The main job's model against random init, by data size.

Fine-tuning a tiny model pretrained here, pretrained vs the same architecture from random
weights, over training-set sizes, tasks and seeds, for each model in MODELS:

  modernbert  the main job's (scripts/main_job.sh): configs/modernbert.py, 1,500 steps,
              into runs/modernbert;
  tiny        the main job until 2026-11-24: configs/tiny.py (BERT-Tiny, BERT's 30,522
              WordPiece pieces, attention guidance), 1,500 steps, into runs/tiny;
  vectors     ModernBERT-Tiny's shape with a random encoder and the corpus' count-based
              word vectors (bert_jax.pretrain.word_vectors: PPMI + SVD of the same corpus
              and BPE vocabulary, config.init_word_vectors), no MLM: its "pretrained" runs
              are random_init plus the vectors, its "random" runs modernbert's;
  vecmlm      both: configs/modernbert.py's 1,500 MLM steps started from the corpus
              vectors with the word table frozen (optim.word_embedding_lr_scale=0), into
              runs/modernbert_vecmlm; its "random" runs are modernbert's;
  vec10       vectors, rescaled to std 0.1 (config.init_word_vectors_std; the fresh
              table's is 0.02, the MLM-trained one's ~0.06): behind the embedding
              LayerNorm the scale changes no output, only how far Adam's steps (~lr per
              entry) move the vectors while fine-tuning;
  vecmlm10    configs/modernbert.py's 1,500 MLM steps from the std-0.1 vectors, the table
              trained, into runs/modernbert_vectors: the main job's model since 2026-11-27
              (63477ad).
  vecmlm10hf  the same model, fine-tuned (both inits) since 2026-11-27 (5ce9d9b): through HF's
              ModernBERT task head (dense, GELU, norm on [CLS], started from the MLM
              transform; Family.prediction_head) instead of the tanh pooler that every run above
              had. Its rows are the code of today; the others' stay as they ran.
  vecmlm10pr  the same model, fine-tuned (both inits) through its MLM head instead
              (prompt-based fine-tuning, 76b725b; PROMPTS: LM-BFF's SST-2 template and
              words, its CoLA template with " wrong" for " incorrect", two pieces here, and
              its MRPC template with lower-case words, " Yes" being two pieces).

PREPARE pretrains each when missing. Each run fine-tunes one with the main job's recipe
(seq 64, lr 5e-4, 3 epochs) from its weights ("pretrained") or from random weights of the
same shape and vocabulary (config.random_init, "random"): SST-2 on fixed random subsets of its
training sentences (train_examples; the subset's seed is the run's seed) scored on dev,
CoLA on all its training sentences scored on dev (Matthews correlation), MRPC on 90% of its
training pairs scored on the other 10% (F1; its dev file is not here). Seeds 0, 1, 2 give
the spread. ~1-3 min a run on the 2-core CPU. DIAGNOSES add variants of the recipe at some
points (RECIPES), among them sel (the epoch picked on held-back training sentences) and
retrain (that many epochs again, on all of them; its runs appear once their sel rows exist).

  python -m experiments.run pretraining_payoff                 # every run, in order
  python -m experiments.run pretraining_payoff --print         # the commands, for a cluster
  python -m experiments.report                                 # the learning curve + table
"""
import json
import os
import statistics
import textwrap

from experiments import sweeps

# Model -> (its pretraining workdir, the command that makes it, its name on the page).
_MODERNBERT = ("runs/modernbert",
               "python -m bert_jax.train --config=configs/modernbert.py --workdir=runs/modernbert")
MODELS = {
    "modernbert": (*_MODERNBERT, "ModernBERT-Tiny"),
    "tiny": ("runs/tiny", "python -m bert_jax.train --config=configs/tiny.py "
             "--workdir=runs/tiny", "BERT-Tiny"),
    "vectors": (*_MODERNBERT, "ModernBERT-Tiny shape, corpus vectors only"),
    "vecmlm": (*_MODERNBERT, "ModernBERT-Tiny, corpus vectors + MLM (table frozen)"),
    "vec10": (*_MODERNBERT, "ModernBERT-Tiny shape, corpus vectors at std 0.1 only"),
    "vecmlm10": (*_MODERNBERT, "ModernBERT-Tiny, MLM from corpus vectors at std 0.1"),
    "vecmlm10hf": (*_MODERNBERT, "ModernBERT-Tiny, MLM from corpus vectors at std 0.1, "
                   "HF's task head"),
    "vecmlm10pr": (*_MODERNBERT, "ModernBERT-Tiny, MLM from corpus vectors at std 0.1, "
                   "prompt-based fine-tuning"),
}
# Model -> {task: (template, verbalizer)}: fine-tuned through the MLM head, both inits alike
# (configs/glue.py's data.prompt_template / prompt_verbalizer; Gao et al. 2021's manual
# prompts, fixed before any run).
PROMPTS = {"vecmlm10pr": {"sst2": ("it was {mask} .", "terrible,great"),
                          "cola": ("this is {mask} .", "wrong,correct"),
                          "mrpc": ("{mask} , {b}", "no,yes")}}
VECTORS = "runs/corpus/bpe-8k-vectors.npz"
VECMLM = ("runs/modernbert_vecmlm",
          "python -m bert_jax.train --config=configs/modernbert.py "
          f"--config.init_word_vectors={VECTORS} --config.optim.word_embedding_lr_scale=0.0 "
          "--config.eval_every_steps=500 --workdir=runs/modernbert_vecmlm")
VECMLM10 = ("runs/modernbert_vectors",
            "python -m bert_jax.train --config=configs/modernbert.py "
            f"--config.init_word_vectors={VECTORS} --config.init_word_vectors_std=0.1 "
            "--workdir=runs/modernbert_vectors")
# Model -> what its "pretrained" runs change (vectors: random weights but the table; vecmlm:
# its own pretraining, while its "random" runs take runs/modernbert's shape like the others).
PRETRAINED = {"vectors": {"random_init": True, "init_word_vectors": VECTORS},
              "vecmlm": {"init_from": VECMLM[0]},
              "vec10": {"random_init": True, "init_word_vectors": VECTORS,
                        "init_word_vectors_std": 0.1},
              "vecmlm10": {"init_from": VECMLM10[0]},
              "vecmlm10hf": {"init_from": VECMLM10[0]},
              "vecmlm10pr": {"init_from": VECMLM10[0]}}
PREPARE = (
    ("runs/corpus/pretrain.txt",
     "python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt"),
    ("runs/corpus/bpe-8k/vocab.json",
     "python -m bert_jax.text.learn_vocab --kind=bpe --input=runs/corpus/pretrain.txt "
     "--vocab_size=8192 --output=runs/corpus/bpe-8k"),
    (VECTORS, "python -m bert_jax.pretrain.word_vectors --config=configs/modernbert.py "
     f"--output={VECTORS}"),
) + tuple(dict.fromkeys((f"{workdir}/eval_results.json", cmd)
                        for workdir, cmd, _ in MODELS.values())) + (
    (f"{VECMLM[0]}/eval_results.json", VECMLM[1]),
    (f"{VECMLM10[0]}/eval_results.json", VECMLM10[1]))
METRICS = {"eval_results.json": ("step", "eval_accuracy", "eval_matthews_corrcoef", "eval_f1",
                                 "train_examples_per_sec", "selected_step", "selected_accuracy")}

SST2_SIZES = (500, 1000, 2000, 8000)
SEEDS = (0, 1, 2)
INITS = ("pretrained", "random")
# Task -> (config, the training-set sizes (0 = all), the metric scored).
TASKS = {
    "sst2": ("configs/glue.py:dataset=sst2,train_examples={size}", SST2_SIZES, "eval_accuracy"),
    "cola": ("configs/glue.py:dataset=cola", (0,), "eval_matthews_corrcoef"),
    "mrpc": ("configs/glue.py:dataset=mrpc,heldout=0.1", (0,), "eval_f1"),
}
# Variants: the curve's recipe changed in one way at one point, both inits alike; run
# MODEL_TASK_nSIZE-RECIPE_INIT_sSEED. ep10 and mean are diagnoses read on dev: they explain
# the curve, they do not pick a recipe. sel is a recipe that picks for itself: up to 10
# epochs, the run ending on the epoch that scored best on 10% of its training sentences
# held back (config.data.select_fraction; dev never chooses). retrain completes sel: the
# same run again on all its training sentences (none held back) for as many epochs as its
# sel run picked, so that the weights scored are the end of an annealed schedule, not a
# checkpoint from the middle of sel's 10-epoch decay (EPOCHS_FROM: the sel run's row).
SEL_EPOCHS = 10
RECIPES = {"ep10": ({"num_train_epochs": 10}, "10 epochs"),
           "mean": ({"classifier_pooling": "mean"}, "mean of the tokens"),
           "sel": ({"num_train_epochs": SEL_EPOCHS, "data.select_fraction": 0.1},
                   "best of 10 epochs on 10% held back"),
           "retrain": ({}, "the epochs sel picked, retrained on all")}
EPOCHS_FROM = {"retrain": "sel"}
DIAGNOSES = (("modernbert", "sst2", 1000, "ep10"), ("modernbert", "sst2", 1000, "mean"),
             ("vectors", "sst2", 1000, "ep10"), ("vecmlm", "sst2", 1000, "ep10")) + tuple(
                 (model, "sst2", size, "sel") for model in ("vectors", "vecmlm10")
                 for size in SST2_SIZES) + tuple(
                 ("vecmlm10", "sst2", size, "retrain") for size in SST2_SIZES)
RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results",
                       "pretraining_payoff.jsonl")


def picked_epochs(rows) -> dict:
  """{sel run name: the epoch its run ended on}: selected_step over the steps of one of its
  SEL_EPOCHS epochs (rows: the sweep's results)."""
  return {row["run"]: round(row["metrics"]["selected_step"] * SEL_EPOCHS /
                            row["metrics"]["step"])
          for row in rows if "selected_step" in row.get("metrics", {})}


def _committed_rows():
  if not os.path.isfile(RESULTS):
    return []
  with open(RESULTS) as f:
    return [json.loads(line) for line in f if line.strip()]


def get_sweep():
  points = [(model, task, size, "") for model in MODELS
            for task, (_, sizes, _) in TASKS.items() for size in sizes]
  points += [(model, task, size, f"-{recipe}") for model, task, size, recipe in DIAGNOSES]
  epochs = picked_epochs(_committed_rows())
  runs = {}
  for model, task, size, recipe in points:
    for init in INITS:
      for seed in SEEDS:
        name = f"{model}_{task}_n{size or 'all'}{recipe}_{init}_s{seed}"
        source = EPOCHS_FROM.get(recipe[1:])
        picked = {}  # the epoch count its source run picked, if it takes one
        if source:
          source_run = name.replace(f"-{recipe[1:]}_", f"-{source}_")
          if source_run not in epochs:
            continue  # its sel run has no row yet
          picked = {"num_train_epochs": epochs[source_run]}
        prompt = PROMPTS.get(model, {}).get(task)
        prompt = ({"data.prompt_template": prompt[0], "data.prompt_verbalizer": prompt[1]}
                  if prompt else {})
        runs[name] = {
            "config": TASKS[task][0].format(size=size),
            "overrides": {"init_from": MODELS[model][0], "random_init": init == "random",
                          "data.max_seq_length": 64, "optim.learning_rate": "5e-4",
                          "seed": seed, "data.seed": seed, **sweeps.PADDED,
                          **(RECIPES[recipe[1:]][0] if recipe else {}),
                          **picked, **prompt,
                          **(PRETRAINED.get(model, {}) if init == "pretrained" else {})}}
  return runs


def _score(row):
  task = row["run"].split("_")[1]
  return row["metrics"].get(TASKS[task][2])


COLUMNS = (
    ("run", lambda row: row["run"]),
    ("dev score (%)", lambda row: f"{100 * _score(row):.2f}"),
    ("steps", lambda row: str(row["metrics"]["step"])),
)


def summary(rows):
  """{(model, task, size, init): (mean, min, max, seeds)} of the task's score."""
  groups = {}
  for row in rows:
    model, task, size, init, _ = row["run"].split("_")
    if _score(row) is not None:
      groups.setdefault((model, task, size[1:], init), []).append(_score(row))
  return {key: (statistics.mean(v), min(v), max(v), len(v)) for key, v in groups.items()}


def gap_verdict(pretrained, random) -> str:
  """Whether pretraining beat random init by more than the seeds' spread."""
  if min(pretrained[3], random[3]) < 3:
    return "fewer than 3 seeds"
  if pretrained[1] > random[2]:
    return "pretrained better on every seed"
  if random[1] > pretrained[2]:
    return "random init better on every seed"
  return "ranges overlap"


def render(rows, plots_dir) -> str:
  """The results page's section: the learning curves' table and plot."""
  import matplotlib.pyplot as plt  # the results page only

  stats = summary(rows)
  lines = ["| model | task (metric) | training examples | pretrained here | random init | gap | "
           "gap vs seeds |", "|---|---|---|---|---|---|---|"]
  cell = lambda s: f"{100 * s[0]:.2f} [{100 * s[1]:.2f}, {100 * s[2]:.2f}]"  # noqa: E731
  curves = {}  # (model, recipe) -> the SST-2 sizes it has both inits of ("": the curve's)
  for model, (_, _, name) in MODELS.items():
    for task, (_, sizes, metric) in TASKS.items():
      for size in sizes:
        key = str(size or "all")
        pre = stats.get((model, task, key, "pretrained"))
        rnd = stats.get((model, task, key, "random"))
        if pre is None or rnd is None:
          continue
        lines.append(f"| {name} | {task} ({metric.removeprefix('eval_')}) | {key} | "
                     f"{cell(pre)} | {cell(rnd)} | {100 * (pre[0] - rnd[0]):+.2f} | "
                     f"{gap_verdict(pre, rnd)} |")
        if task == "sst2":
          curves.setdefault((model, ""), []).append(size)
  for model, task, size, recipe in DIAGNOSES:
    pre = stats.get((model, task, f"{size}-{recipe}", "pretrained"))
    rnd = stats.get((model, task, f"{size}-{recipe}", "random"))
    if pre is not None and rnd is not None:
      lines.append(f"| {MODELS[model][2]} | {task} ({TASKS[task][2].removeprefix('eval_')}) | "
                   f"{size}, {RECIPES[recipe][1]} | {cell(pre)} | {cell(rnd)} | "
                   f"{100 * (pre[0] - rnd[0]):+.2f} | {gap_verdict(pre, rnd)} |")
      if task == "sst2" and recipe in ("sel", "retrain"):
        curves.setdefault((model, recipe), []).append(size)
  curves = {key: sizes for key, sizes in curves.items() if not key[1] or len(sizes) > 1}
  if curves:
    os.makedirs(plots_dir, exist_ok=True)
    cols = min(3, len(curves))
    rows_ = -(-len(curves) // cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(5 * cols, 3.9 * rows_), squeeze=False,
                             sharey=True)
    for ax in axes.flat[len(curves):]:
      ax.set_visible(False)
    for ax, ((model, recipe), sizes) in zip(axes.flat, curves.items()):
      for init, color in zip(INITS, ("tab:blue", "tab:gray")):
        points = [stats[(model, "sst2", f"{s}-{recipe}" if recipe else str(s), init)]
                  for s in sizes]
        means = [100 * p[0] for p in points]
        ax.errorbar(sizes, means, yerr=[[m - 100 * p[1] for m, p in zip(means, points)],
                                        [100 * p[2] - m for m, p in zip(means, points)]],
                    marker="o", capsize=3, color=color, label=f"{init} (seed range)")
      ax.set_xscale("log")
      ax.set_xticks(sizes, [str(s) for s in sizes])
      ax.minorticks_off()
      ax.set_xlabel("SST-2 training sentences")
      ax.set_title(textwrap.fill(MODELS[model][2] + (f"; {RECIPES[recipe][1]}" if recipe else ""),
                                 48), fontsize=9)
      ax.legend(fontsize=8)
    for row in axes:
      row[0].set_ylabel("SST-2 dev accuracy (%)")
    fig.suptitle("SST-2 dev accuracy: pretrained here vs random init", fontsize=11)
    fig.tight_layout()
    fig.savefig(os.path.join(plots_dir, "pretraining_payoff.png"), dpi=90)
    plt.close(fig)
    lines += ["", "![pretraining_payoff](results/plots/pretraining_payoff.png)"]
  return "\n".join(lines)
