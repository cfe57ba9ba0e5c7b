r"""Prints the markdown table of a sweep from its results file (the README's tables).

  python -m experiments.tables plateau
  python -m experiments.tables finetune_minilm [--results=PATH]

Rows are the results file's (experiments/results/SWEEP.jsonl, written by
`python -m experiments.run SWEEP`), in its order; the columns are the sweep's COLUMNS.
"""
import argparse

from experiments import sweeps


def markdown(columns, rows: list[dict]) -> str:
  """A markdown table: columns are (header, row -> cell text) pairs."""
  lines = ["| " + " | ".join(header for header, _ in columns) + " |",
           "|" + "---|" * len(columns)]
  lines += ["| " + " | ".join(cell(row) for _, cell in columns) + " |" for row in rows]
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("sweep", help=f"one of: {', '.join(sweeps.names())}")
  parser.add_argument("--results", help="results file (default experiments/results/SWEEP.jsonl)")
  args = parser.parse_args(argv)
  module = sweeps.load(args.sweep)
  path = args.results or sweeps.results_path(args.sweep)
  rows = sweeps.read_results(path)
  if not rows:
    raise SystemExit(f"no results in {path}: run python -m experiments.run {args.sweep}")
  print(markdown(module.COLUMNS, rows))


if __name__ == "__main__":
  main()
