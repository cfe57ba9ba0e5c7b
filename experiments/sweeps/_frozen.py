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
import os

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


def bars(plots_dir: str, name: str, rows, groups: dict, paper: dict) -> str:
  """A bar plot (PNG in plots_dir) per group {title: {label: (variant, metric path)}}: each
  variant's mean over the seeds with their range, the paper's number (paper {title: {label:
  value}}) as a dot; its markdown line ("" without runs)."""
  import matplotlib.pyplot as plt  # experiments.report, which renders the page, sets Agg
  stats = {(title, label): ablation.summary(rows, path, lambda v: 100 * v).get(variant)
           for title, bars_ in groups.items() for label, (variant, path) in bars_.items()}
  if not any(stats.values()):
    return ""
  fig, axes = plt.subplots(1, len(groups), figsize=(3.6 * len(groups), 3.8), squeeze=False)
  for ax, (title, bars_) in zip(axes[0], groups.items()):
    labels = list(bars_)
    shown = [stats[title, label] or (0.0, 0.0, 0.0, 0) for label in labels]
    ax.bar(range(len(labels)), [s[0] for s in shown], color="tab:blue", capsize=3,
           yerr=[[s[0] - s[1] for s in shown], [s[2] - s[0] for s in shown]])
    if paper.get(title):
      ax.plot(range(len(labels)), [paper[title].get(label, float("nan")) for label in labels],
              "o", color="tab:orange", label="paper")
      ax.legend(fontsize=7)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
  fig.suptitle(name, fontsize=10)
  fig.tight_layout()
  os.makedirs(plots_dir, exist_ok=True)
  fig.savefig(os.path.join(plots_dir, f"{name}.png"), dpi=90)
  plt.close(fig)
  return f"![{name}](results/plots/{name}.png)"


COLUMNS = (("run", lambda row: row["run"]),
           ("scores (%)", lambda row: ", ".join(
               f"{key[len('eval_'):]} {100 * row['metrics'][key]:.2f}"
               for key in METRICS["eval_results.json"][1:5] if key in row["metrics"])),
           ("steps", lambda row: str(row["metrics"]["step"])),
           ("wall time", lambda row: f"{row['wall_seconds'] / 60:.1f} min"),
           ("command", lambda row: f"`{row['command']}`"))
