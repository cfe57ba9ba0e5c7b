"""Experiments: sweeps as data (experiments/sweeps/), their runner and results tables.

  python -m experiments.run SWEEP [RUN ...] [--print] [--force] [--results=PATH]
  python -m experiments.tables SWEEP [--results=PATH]

Results of every finished run are committed in experiments/results/SWEEP.jsonl.
"""
