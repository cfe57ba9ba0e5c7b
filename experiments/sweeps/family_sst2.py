r"""Every family fine-tunes through the same CLI: a tiny model of each, from random weights,
on 8,000 SST-2 training sentences (3 epochs, seq 64, lr 5e-4: the main job's recipe),
scored on SST-2 dev against the majority class (50.92%: 444 of 872 dev sentences are
positive).

  python -m experiments.run family_sst2          # PREPARE writes the random HF folders first
  python -m experiments.tables family_sst2

The folders (experiments/random_family_folders.py) are HF checkpoints of each family's bare
encoder at its tiny size with BERT's WordPiece vocab, so the run shows the family's model
code training end to end through `--config.init_from`, not what pretraining adds.
"""
from experiments import sweeps
from experiments.random_family_folders import TINY

PREPARE = (("runs/family_random/modernbert/config.json",
            "python -m experiments.random_family_folders --output=runs/family_random"),)
METRICS = {"eval_results.json": ("step", "eval_accuracy", "train_examples_per_sec")}
MAJORITY = 444 / 872


def get_sweep():
  return {family: {"config": "configs/glue.py:dataset=sst2,train_examples=8000",
                   "overrides": {"init_from": f"runs/family_random/{family}",
                                 "data.max_seq_length": 64, "optim.learning_rate": "5e-4",
                                 **sweeps.PADDED}}
          for family in TINY}


COLUMNS = (
    ("family (tiny, random init)", lambda row: row["run"]),
    ("SST-2 dev accuracy (%)", lambda row: f"{100 * row['metrics']['eval_accuracy']:.2f}"),
    ("above the majority class (50.92%)",
     lambda row: "yes" if row["metrics"]["eval_accuracy"] > MAJORITY else "no"),
    ("steps", lambda row: str(row["metrics"]["step"])),
)
