"""Sweeps: one Python file per sweep, holding data, not a runner.

A sweep file `experiments/sweeps/NAME.py` has
  a docstring    what the sweep measures, its prerequisites and the commands;
  get_sweep()    {run name: {"config": "configs/x.py[:arg]", "overrides": {"a.b": value},
                 optionally "stages": {stage: {"config", "overrides", "metrics": keys}}}},
                 in the order the runs go (and their rows are kept in); stages are
                 fine-tunings run after the run, from its workdir (init_from);
  PREPARE        optional ((output path, command), ...): run first where the output is
                 missing (`experiments.run` does; `--print` asks for them instead);
  METRICS        {"eval_results.json": keys or None (all), "metrics.jsonl": keys}: what
                 goes into a results row; "metrics.jsonl" (pretraining sweeps) keeps the
                 eval rows by step under metrics["eval_by_step"]["STEP"];
  COLUMNS        ((header, row -> cell text), ...): the markdown table of the results.

A results row (experiments/results/NAME.jsonl, one per run): {"sweep", "run", "command",
"git_revision", "wall_seconds", "finished_at", "metrics"}, with "stage_commands" for runs
with stages and "report" (the run report's total: tokens, FLOPs, kWh, CO2e) for runs made
since there is one; rows imported from an older record also carry "imported_from".
"""
import importlib
import json
import os

_DIR = os.path.dirname(os.path.abspath(__file__))
# The fine-tuning overrides every sweep's GLUE / CoNLL runs carry: dynamically padded
# batches, as every committed row trained before pack_each_batch became those configs'
# default (2026-11-26, be2a430). Packing gives the same losses with dropout off, but other dropout
# draws with it on, so rows made later stay comparable with the earlier ones only this way.
PADDED = {"data.pack_each_batch": False}
RESULTS_DIR = os.path.join(os.path.dirname(_DIR), "results")


def names() -> list[str]:
  return sorted(f[:-3] for f in os.listdir(_DIR) if f.endswith(".py") and not f.startswith("_"))


def load(name: str):
  """The sweep module `name`; an unknown name exits with the known ones."""
  if name not in names():
    raise SystemExit(f"unknown sweep {name!r}; known sweeps: {', '.join(names())}")
  return importlib.import_module(f"experiments.sweeps.{name}")


def results_path(name: str) -> str:
  return os.path.join(RESULTS_DIR, f"{name}.jsonl")


def read_results(path: str) -> list[dict]:
  """The rows of a results file ([] if there is none yet)."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]
