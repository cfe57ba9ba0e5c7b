"""What every pretraining ablation sweep shares: the baseline run, the evaluations, the table.

An ablation sweep (bert_table8.py, roberta_masking.py, ...) changes one pretraining choice
of one baseline and keeps everything else. Its file holds data only:

  VARIANTS = {name: (config overrides, table label)}   the choices compared;
  PAPER = {"source": ..., "metric": ..., "values": {name: number}, "direction": ...}
    the paper's table the sweep puts ours beside (values only where the paper has them);
  get_sweep = ablation.sweep(VARIANTS)   (plus the module-level names below).

The baseline: configs/tiny.py (BERT-Tiny, L2/H128, the main job's recipe) on the prepared
corpus with a WordPiece vocab of 8,192 pieces learned from it, STEPS steps of 32 rows of
SEQ_LENGTH tokens (the family sweep's rows; half the main job's 128, so a run costs about
half as much), PREDICTIONS masked-LM slots a row (15% of SEQ_LENGTH: a sweep changing the
rate sets its own), seeds SEEDS.
Each run is evaluated the same way (the runner's stages, each fine-tuning from the
pretrained workdir):
  held-out MLM accuracy and loss   the pretraining's own eval (eval_results.json);
  sst2     SST-2 dev accuracy after fine-tuning on 4,000 training sentences, 3 epochs;
  mrpc     MRPC F1 on a held-out 10% of its training pairs (its dev file is not here);
  conll    CoNLL-2003 dev entity F1 fine-tuned on 2,000 training sentences;
  conll_features  the same with the encoder frozen, the tagger reading every layer
           concatenated (BERT's feature-based comparison).
Run names are VARIANT_sSEED; the results page (python -m experiments.report) averages a
variant over its seeds and shows the spread.
"""
import os
import statistics

from experiments import sweeps

VOCAB = "runs/corpus/vocab-8k.txt"
PREPARE = (
    ("runs/corpus/pretrain.txt",
     "python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt"),
    (VOCAB, "python -m bert_jax.text.learn_vocab --input=runs/corpus/pretrain.txt "
            f"--vocab_size=8192 --output={VOCAB}"),
)
STEPS = 1000
SEEDS = (0, 1)
SEQ_LENGTH = 64
PREDICTIONS = 10  # ceil(0.15 * SEQ_LENGTH): what BERT's 15% selects, at most

_PRETRAINING_KEYS = ("step", "eval_mlm_accuracy", "eval_mlm_loss", "eval_nsp_accuracy",
                     "eval_sop_accuracy", "eval_sbo_accuracy")
# Held-out MLM every STEPS // 4 steps: the per-run curves of the results page.
METRICS = {"eval_results.json": _PRETRAINING_KEYS,
           "metrics.jsonl": ("eval_mlm_accuracy", "eval_mlm_loss")}

_FINETUNE = {"optim.learning_rate": "5e-4", "data.max_seq_length": 64, **sweeps.PADDED}
STAGES = {
    "sst2": {"config": "configs/glue.py:dataset=sst2,train_examples=4000",
             "overrides": _FINETUNE, "metrics": ("eval_accuracy",)},
    "mrpc": {"config": "configs/glue.py:dataset=mrpc,heldout=0.1",
             "overrides": {**_FINETUNE, "data.max_seq_length": 128},
             "metrics": ("eval_f1", "eval_accuracy")},
    "conll": {"config": "configs/conll.py:train_examples=2000",
              "overrides": {"optim.learning_rate": "5e-4", **sweeps.PADDED},
              "metrics": ("eval_f1",)},
    "conll_features": {"config": "configs/conll.py:train_examples=2000",
                       "overrides": {"optim.learning_rate": "1e-3", "freeze_encoder": True,
                                     "feature_layers": "0,1,2", **sweeps.PADDED},
                       "metrics": ("eval_f1",)},
}

# The numbers the results page shows per variant: (column, metric path in a row), values
# in [0, 1] (a third element where they are not: `shown`).
EVALUATIONS = (
    ("held-out MLM acc", ("eval_mlm_accuracy",)),
    ("SST-2 dev acc", ("sst2", "eval_accuracy")),
    ("MRPC held-out F1", ("mrpc", "eval_f1")),
    ("CoNLL dev F1 (fine-tuned)", ("conll", "eval_f1")),
    ("CoNLL dev F1 (features)", ("conll_features", "eval_f1")),
)


def baseline_overrides(vocab_size: int) -> dict:
  return {"data.vocab_path": os.path.abspath(VOCAB), "model.vocab_size": vocab_size,
          "data.max_seq_length": SEQ_LENGTH, "data.max_predictions_per_seq": PREDICTIONS,
          "num_train_steps": STEPS, "eval_every_steps": STEPS // 4,
          "checkpoint_every_steps": STEPS, "data.eval_held_out_docs": 20, "eval_batches": 10}


def vocab_size() -> int:
  with open(os.path.abspath(VOCAB)) as f:  # one piece per line
    return sum(1 for _ in f)


def sweep(variants: dict, config: str = "configs/tiny.py", seeds=SEEDS, stages=None):
  """get_sweep() of an ablation: every variant x seed, baseline + the variant's overrides."""
  def get_sweep():
    base = baseline_overrides(vocab_size())
    runs = {}
    for name, (changes, _) in variants.items():
      for seed in seeds:
        runs[f"{name}_s{seed}"] = {
            "config": config,
            "overrides": {**base, "seed": seed, "data.seed": seed, **changes},
            "stages": STAGES if stages is None else stages}
    return runs
  return get_sweep


def variant_of(run: str) -> str:
  """"mask_80_10_10_s1" -> "mask_80_10_10"."""
  return run.rsplit("_s", 1)[0]


def metric(row: dict, path: tuple[str, ...]):
  value = row["metrics"]
  for key in path:
    if not isinstance(value, dict) or key not in value:
      return None
    value = value[key]
  return value


def shown(evaluation: tuple):
  """What turns an evaluation's value in a row into the page's number: x 100 for a
  fraction (the default), x the third element where that is a number (SQuAD's official
  EM/F1 are already %: (header, path, 1.0)), or the third element itself where it is a
  function (a perplexity: math.exp of a loss)."""
  how = evaluation[2] if len(evaluation) > 2 else 100.0
  return how if callable(how) else (lambda value: how * value)


def columns(variants: dict, evaluations=EVALUATIONS):
  """COLUMNS of an ablation sweep's per-run table: run, label, every evaluation (a sweep
  with a stage of its own passes EVALUATIONS plus its column)."""
  def cell(evaluation):
    path, show = evaluation[1], shown(evaluation)
    return lambda row: ("" if metric(row, path) is None else f"{show(metric(row, path)):.2f}")
  return ((("run", lambda row: row["run"]),
           ("variant", lambda row: variants[variant_of(row["run"])][1]))
          + tuple((evaluation[0], cell(evaluation)) for evaluation in evaluations))


def summary(rows: list[dict], path: tuple[str, ...], show=None) -> dict:
  """{variant: (mean, min, max, seeds)} of one metric over the rows that have it, each
  row's value passed through show (`shown(evaluation)`) first where given."""
  groups = {}
  for row in rows:
    value = metric(row, path)
    if value is not None:
      groups.setdefault(variant_of(row["run"]), []).append(
          value if show is None else show(value))
  return {v: (statistics.mean(x), min(x), max(x), len(x)) for v, x in groups.items()}
