r"""Does pretraining here pay off? SST-2 fine-tuning of the main job's tiny model, pretrained
vs the same architecture from random weights, over training-set sizes and seeds.

The main job (scripts/main_job.sh) pretrains configs/tiny.py into runs/tiny (PREPARE runs
it when missing). Each run fine-tunes that model on a fixed random subset of SST-2's
training sentences (train_examples; the subset's seed is the run's seed) with the main
job's recipe (seq 64, lr 5e-4, 3 epochs), from its weights ("pretrained") or from random
weights of the same shape and vocabulary (config.random_init, "random"), and scores SST-2
dev. Seeds 0, 1, 2 give the spread. ~1-3 min a run on the 2-core CPU (all rows: more).

  python -m experiments.run pretraining_payoff                 # every run, in order
  python -m experiments.run pretraining_payoff --print         # the commands, for a cluster
  python -m experiments.tables pretraining_payoff              # one row per run
"""
import statistics

PREPARE = (("runs/tiny/eval_results.json", "bash scripts/main_job.sh"),)
METRICS = {"eval_results.json": ("step", "eval_accuracy", "train_examples_per_sec")}

SIZES = (500, 1000, 2000, 8000)
SEEDS = (0, 1, 2)
INITS = ("pretrained", "random")


def get_sweep():
  runs = {}
  for size in SIZES:
    for init in INITS:
      for seed in SEEDS:
        runs[f"n{size}_{init}_s{seed}"] = {
            "config": f"configs/glue.py:task=sst2,train_examples={size}",
            "overrides": {"init_from": "runs/tiny", "random_init": init == "random",
                          "data.max_seq_length": 64, "optim.learning_rate": "5e-4",
                          "seed": seed, "data.seed": seed}}
  return runs


COLUMNS = (
    ("run", lambda row: row["run"]),
    ("SST-2 dev accuracy (%)", lambda row: f"{100 * row['metrics']['eval_accuracy']:.2f}"),
    ("steps", lambda row: str(row["metrics"]["step"])),
)


def summary(rows):
  """{(size, init): (mean, min, max) dev accuracy over the seeds that ran}."""
  groups = {}
  for row in rows:
    size, init, _ = row["run"].split("_")
    groups.setdefault((int(size[1:]), init), []).append(row["metrics"]["eval_accuracy"])
  return {key: (statistics.mean(v), min(v), max(v)) for key, v in sorted(groups.items())}
