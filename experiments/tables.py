r"""Prints the markdown table of a sweep from its results file (the README's tables).

  python -m experiments.tables plateau
  python -m experiments.tables finetune_minilm [--results=PATH]

Rows are the results file's (experiments/results/SWEEP.jsonl, written by
`python -m experiments.run SWEEP`), in its order; the columns are the sweep's COLUMNS, and
a "command" column is printed as a list of each run's command under the table.
When the rows carry run reports, a line after the table gives the sweep's total compute,
energy and CO2e (bert_jax/run/run_report.py states how they are estimated).
"""
import argparse

from experiments import sweeps


# A column with this header is written as a list under the table, one command a run: a
# command is too long for a table cell that fits the page.
COMMAND = "command"


def markdown(columns, rows: list[dict]) -> str:
  """A markdown table: columns are (header, row -> cell text) pairs. A COMMAND column
  becomes a "Commands" list under the table, keyed by each row's run."""
  table_columns = [column for column in columns if column[0] != COMMAND]
  lines = ["| " + " | ".join(header for header, _ in table_columns) + " |",
           "|" + "---|" * len(table_columns)]
  lines += ["| " + " | ".join(cell(row) for _, cell in table_columns) + " |" for row in rows]
  command = dict(columns).get(COMMAND)
  if command is not None and rows:
    lines += ["", "Commands:", ""]
    lines += [f"- {row['run']}: {command(row)}" for row in rows]
  return "\n".join(lines)


def sweep_total(rows: list[dict]) -> str | None:
  """One line summing the rows' run reports; None when no row has one."""
  reports = [row["report"] for row in rows if "report" in row]
  if not reports:
    return None
  def add(key):
    values = [r[key] for r in reports if r.get(key) is not None]
    return sum(values), len(values)
  flops, _ = add("model_flops")
  tokens, _ = add("tokens")
  seconds, _ = add("wall_seconds")
  kwh, with_energy = add("kwh")
  co2, _ = add("co2e_kg")
  line = (f"Sweep total ({len(reports)} of {len(rows)} runs with a run report): "
          f"{tokens:,} tokens, {flops:.3g} model FLOPs, {seconds / 3600:.2f} h")
  if with_energy:
    line += f", {kwh:.3g} kWh, {co2:.3g} kg CO2e ({with_energy} runs with an energy figure)"
  if shared := sum("same_as" in row for row in rows):
    line += (f"; {shared} of the runs are another sweep's run (same_as), counted here but "
             "spent once")
  return line


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
  if (line := sweep_total(rows)) is not None:
    print(f"\n{line}")


if __name__ == "__main__":
  main()
