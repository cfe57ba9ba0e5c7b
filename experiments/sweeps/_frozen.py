"""What the frozen-against-fine-tuned sweeps share (feature_based_ner, tune_or_not): the two
recipes, each fixed before any run and never tuned on the dev sets, the seeds, the rows'
metrics and the page's table and verdicts.

Frozen (❄️): the encoder wholly frozen, its chosen hidden layers (config.feature_layers;
hidden state 0 is the embeddings, i layer i, -1 the top) computed once per example
(config.cache_features) and read by a two-layer BiLSTM head (config.feature_head=bilstm;
sentence tasks average it over the tokens), FROZEN_EPOCHS epochs at lr 1e-3 (the head
starts from nothing: Adam's usual rate for an LSTM). Fine-tuned (🔥): every weight trains
with the task's linear head, FINETUNE_EPOCHS epoch(s) at lr 1e-4 (finetune_minilm's rate).
The cache makes a frozen epoch cost the head's steps only, so the frozen runs get more
epochs than the fine-tuned ones: each side's recipe at about the same wall time, not the
same number of passes. Every run pads its batches (cached layers are read one example per
row), seeds 0 and 1 (init, dropout, shuffling and the training subset).
"""
from experiments.sweeps import _ablation as ablation

SEEDS = (0, 1)
FROZEN_EPOCHS = 3
FINETUNE_EPOCHS = 1
METRICS = {"eval_results.json": ("step", "eval_f1", "eval_accuracy", "eval_pearson",
                                 "eval_spearman", "train_examples_per_sec")}
PADDED = {"data.pack_each_batch": False}
FINETUNE = {"num_train_epochs": FINETUNE_EPOCHS, "optim.learning_rate": "1e-4"}


def frozen(layers: str, mix: str = "concat") -> dict:
  """A frozen run's overrides: `layers` (config.feature_layers) combined by `mix`."""
  return {"freeze_encoder": True, "cache_features": True, "feature_layers": layers,
          "feature_mix": mix, "feature_head": "bilstm", "num_train_epochs": FROZEN_EPOCHS,
          "optim.learning_rate": "1e-3"}


def seeded(name: str, config: str, overrides: dict, seeds=SEEDS) -> dict:
  """{NAME_sSEED: run} for each seed (ablation.variant_of gives NAME back)."""
  return {f"{name}_s{seed}": {"config": config, "overrides": {
      **PADDED, **overrides, "seed": seed, "data.seed": seed}} for seed in seeds}


def cell(rows, variant: str, path: tuple[str, ...]) -> str:
  """'mean [lowest, highest seed]' in % of `variant`'s runs (empty: not run)."""
  stats = ablation.summary(rows, path, lambda value: 100 * value).get(variant)
  return "" if stats is None else f"{stats[0]:.2f} [{stats[1]:.2f}, {stats[2]:.2f}]"


def seeds_cell(rows, variant: str) -> str:
  count = sum(ablation.variant_of(row["run"]) == variant for row in rows)
  return str(count) if count else "not run"


def direction(rows, worse: str, better: str, path: tuple[str, ...]) -> str:
  """The results page's verdict (experiments/report.py): held, not decided or reversed."""
  from experiments import report  # the page's rule; report imports the sweeps, not back
  return report.direction(rows, worse, better, path)


COLUMNS = (("run", lambda row: row["run"]),
           ("scores (%)", lambda row: ", ".join(
               f"{key[len('eval_'):]} {100 * row['metrics'][key]:.2f}"
               for key in METRICS["eval_results.json"][1:5] if key in row["metrics"])),
           ("steps", lambda row: str(row["metrics"]["step"])),
           ("wall time", lambda row: f"{row['wall_seconds'] / 60:.1f} min"),
           ("command", lambda row: f"`{row['command']}`"))
