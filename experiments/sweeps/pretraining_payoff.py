r"""Does pretraining here pay off? The main job's model against random init, by data size.

Fine-tuning the main job's tiny model, pretrained vs the same architecture from random
weights, over training-set sizes, tasks and seeds.

The main job (scripts/main_job.sh) pretrains configs/tiny.py into runs/tiny (PREPARE runs
it when missing). Each run fine-tunes that model with the main job's recipe (seq 64,
lr 5e-4, 3 epochs) from its weights ("pretrained") or from random weights of the same shape
and vocabulary (config.random_init, "random"): SST-2 on fixed random subsets of its
training sentences (train_examples; the subset's seed is the run's seed) scored on dev,
CoLA on all its training sentences scored on dev (Matthews correlation), MRPC on 90% of its
training pairs scored on the other 10% (F1; its dev file is not here). Seeds 0, 1, 2 give
the spread. ~1-3 min a run on the 2-core CPU.

  python -m experiments.run pretraining_payoff                 # every run, in order
  python -m experiments.run pretraining_payoff --print         # the commands, for a cluster
  python -m experiments.report                                 # the learning curve + table
"""
import os
import statistics

PREPARE = (("runs/tiny/eval_results.json", "bash scripts/main_job.sh"),)
METRICS = {"eval_results.json": ("step", "eval_accuracy", "eval_matthews_corrcoef", "eval_f1",
                                 "train_examples_per_sec")}

SST2_SIZES = (500, 1000, 2000, 8000)
SEEDS = (0, 1, 2)
INITS = ("pretrained", "random")
# Task -> (config, the training-set sizes (0 = all), the metric scored).
TASKS = {
    "sst2": ("configs/glue.py:task=sst2,train_examples={size}", SST2_SIZES, "eval_accuracy"),
    "cola": ("configs/glue.py:task=cola", (0,), "eval_matthews_corrcoef"),
    "mrpc": ("configs/glue.py:task=mrpc,heldout=0.1", (0,), "eval_f1"),
}


def get_sweep():
  runs = {}
  for task, (config, sizes, _) in TASKS.items():
    for size in sizes:
      for init in INITS:
        for seed in SEEDS:
          runs[f"{task}_n{size or 'all'}_{init}_s{seed}"] = {
              "config": config.format(size=size),
              "overrides": {"init_from": "runs/tiny", "random_init": init == "random",
                            "data.max_seq_length": 64, "optim.learning_rate": "5e-4",
                            "seed": seed, "data.seed": seed}}
  return runs


def _score(row):
  task = row["run"].split("_")[0]
  return row["metrics"].get(TASKS[task][2])


COLUMNS = (
    ("run", lambda row: row["run"]),
    ("dev score (%)", lambda row: f"{100 * _score(row):.2f}"),
    ("steps", lambda row: str(row["metrics"]["step"])),
)


def summary(rows):
  """{(task, size, init): (mean, min, max, seeds)} of the task's score."""
  groups = {}
  for row in rows:
    task, size, init, _ = row["run"].split("_")
    if _score(row) is not None:
      groups.setdefault((task, size[1:], init), []).append(_score(row))
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
  """The results page's section: the learning curve table and plot."""
  import matplotlib.pyplot as plt  # the results page only

  stats = summary(rows)
  lines = ["| task (metric) | training examples | pretrained here | random init | gap | "
           "gap vs seeds |", "|---|---|---|---|---|---|"]
  for task, (_, sizes, metric) in TASKS.items():
    for size in sizes:
      key = str(size or "all")
      pre, rnd = stats.get((task, key, "pretrained")), stats.get((task, key, "random"))
      if pre is None or rnd is None:
        continue
      cell = lambda s: f"{100 * s[0]:.2f} [{100 * s[1]:.2f}, {100 * s[2]:.2f}]"  # noqa: E731
      lines.append(f"| {task} ({metric.removeprefix('eval_')}) | {key} | {cell(pre)} | "
                   f"{cell(rnd)} | {100 * (pre[0] - rnd[0]):+.2f} | {gap_verdict(pre, rnd)} |")
  sizes = [s for s in SST2_SIZES if ("sst2", str(s), "pretrained") in stats
           and ("sst2", str(s), "random") in stats]
  if sizes:
    os.makedirs(plots_dir, exist_ok=True)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for init, color in zip(INITS, ("tab:blue", "tab:gray")):
      points = [stats[("sst2", str(s), init)] for s in sizes]
      means = [100 * p[0] for p in points]
      ax.errorbar(sizes, means, yerr=[[m - 100 * p[1] for m, p in zip(means, points)],
                                      [100 * p[2] - m for m, p in zip(means, points)]],
                  marker="o", capsize=3, color=color, label=f"{init} (seed range)")
    ax.set_xscale("log")
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("SST-2 training sentences")
    ax.set_ylabel("SST-2 dev accuracy (%)")
    ax.set_title("pretrained here vs random init (BERT-Tiny)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(plots_dir, "pretraining_payoff.png"), dpi=90)
    plt.close(fig)
    lines += ["", "![pretraining_payoff](results/plots/pretraining_payoff.png)"]
  return "\n".join(lines)
