r"""Runs a sweep of experiments/sweeps/ here, one run after another, and records each.

  python -m experiments.run finetune_minilm                  # every run without a row yet
  python -m experiments.run finetune_minilm swag wnli --force
  python -m experiments.run plateau --print                  # the commands, for a cluster
  python -m experiments.tables finetune_minilm               # the markdown table

Run from the repository root. Each run is exactly
`python -m bert_jax.train --config=CONFIG --config.KEY=VALUE ... --workdir=runs/SWEEP/RUN`,
in a fresh workdir (an old one is deleted first), its output also going to
runs/SWEEP/RUN.log; a run with stages (pretraining sweeps: the fine-tunings that evaluate
the pretrained model) then runs each stage's train command with
--config.init_from=runs/SWEEP/RUN in runs/SWEEP/RUN.STAGE, its metrics going under
metrics[STAGE]. A finished run adds one JSON row to experiments/results/SWEEP.jsonl
(or --results): the command, git revision ("-dirty" if the tree has changes outside
experiments/results/), wall time, finish time (UTC), the metrics the sweep's METRICS
names and the run report's total (tokens, FLOPs, kWh, CO2e: bert_jax/run/run_report.py); the file keeps one row per run, in the sweep's order. Runs that already have a row
are skipped (--force re-runs them and replaces their row). A run whose fingerprint (the
resolved config of its train command and of each stage's, workdirs aside, and the metrics
recorded) equals a row's in another results file beside this one is not run again: that
row is copied with `same_as` naming it (the ablation sweeps share their baseline run this
way); --force runs it anyway. A run whose commands read another run's workdir (a
distillation student, its teacher's) has that run trained first when its workdir is not
here (runs/ is not committed: a teacher with a row from another machine trains again, its
row replaced), and such a run is never taken from another sweep's row. A failed run writes no row,
and the runner goes on and exits non-zero at the end. --print prints the commands of the
runs it would do, one per line, and runs nothing.
"""
import argparse
import datetime
import difflib
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from absl import flags
from ml_collections import config_flags

from bert_jax.run import run_report
from experiments import sweeps

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(sweep: str, run: str, spec: dict) -> list[str]:
  """The train command of one run, as an argument list."""
  return _train_command(spec, f"runs/{sweep}/{run}")


def stage_commands(sweep: str, run: str, spec: dict) -> list[tuple[str, list[str]]]:
  """(stage, command) of each fine-tuning stage of a run, in order: each starts from the
  run's workdir (init_from) and trains in runs/SWEEP/RUN.STAGE."""
  workdir = f"runs/{sweep}/{run}"
  return [(stage, _train_command(
      {"config": stage_spec["config"],
       "overrides": {**stage_spec.get("overrides", {}), "init_from": workdir}},
      f"{workdir}.{stage}")) for stage, stage_spec in spec.get("stages", {}).items()]


def _train_command(spec: dict, workdir: str) -> list[str]:
  def value(v):
    return str(v).lower() if isinstance(v, bool) else str(v)

  return (["python", "-m", "bert_jax.train", f"--config={spec['config']}"] +
          [f"--config.{key}={value(v)}" for key, v in spec["overrides"].items()] +
          [f"--workdir={workdir}"])


def _resolved_config(cmd: list[str]) -> dict:
  """The config a train command trains with, as train.py parses it (--workdir aside); the
  config file is read from the repository root."""
  argv = [cmd[0]] + [arg for arg in cmd[3:] if not arg.startswith("--workdir=")]
  for i, arg in enumerate(argv):
    if arg.startswith("--config="):
      file, sep, config_arg = arg.removeprefix("--config=").partition(":")
      argv[i] = f"--config={os.path.join(_REPO, file)}{sep}{config_arg}"
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values, sys_argv=argv)
  flag_values(argv)
  return flag_values.config.to_dict()


def fingerprint(sweep: str, run: str, spec: dict, metrics_spec: dict) -> str:
  """What makes two runs one: the resolved configs of the run's train command and of its
  stages' (init_from aside) and the metrics kept. Training is a pure function of its config
  (the stream, masking and init are drawn from its seeds), so runs with one fingerprint
  give one row."""
  parts = [_resolved_config(command(sweep, run, spec)), metrics_spec]
  for stage, cmd in stage_commands(sweep, run, spec):
    config = _resolved_config(cmd)
    config.pop("init_from", None)
    parts.append([stage, config, spec["stages"][stage].get("metrics")])
  text = json.dumps(parts, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _current_fingerprints(sweep: str) -> dict:
  """{run: fingerprint} of a sweep's runs as its file specifies them today ({} for a name
  that is not a sweep, or one whose runs cannot be listed here, e.g. without its vocab)."""
  try:
    module = sweeps.load(sweep)
    specs = module.get_sweep()
  except (SystemExit, Exception):  # noqa: BLE001 - any sweep that cannot list its runs
    return {}
  metrics_spec = getattr(module, "METRICS", {"eval_results.json": None})
  return {run: fingerprint(sweep, run, spec, metrics_spec) for run, spec in specs.items()}


def _same_run(results_dir: str, fingerprint_: str) -> dict | None:
  """A row of a results file in results_dir whose run has this fingerprint (the first
  found). A row is matched by its run's fingerprint as its sweep specifies it today, and
  by the one stored when it ran where its sweep no longer lists it: a config field added
  since (its default the old behaviour) changes every resolved config, not the run."""
  for name in sorted(os.listdir(results_dir)) if os.path.isdir(results_dir) else ():
    if name.endswith(".jsonl"):
      current = None
      for row in sweeps.read_results(os.path.join(results_dir, name)):
        if row.get("fingerprint") == fingerprint_:
          return row
        if current is None:
          current = _current_fingerprints(name[:-len(".jsonl")])
        if current.get(row["run"]) == fingerprint_:
          return row
  return None


def git_revision() -> str:
  """HEAD, plus "-dirty" if the tree differs from it outside experiments/results/."""
  def git(*args):
    return subprocess.run(["git", *args], cwd=_REPO, capture_output=True, text=True,
                          check=True).stdout.strip()

  try:
    head = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--", ".", ":!experiments/results")
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return head + ("-dirty" if dirty else "")


def collect_metrics(workdir: str, spec: dict) -> dict:
  """The METRICS of a finished workdir: final eval results (+ eval rows by step)."""
  with open(os.path.join(workdir, "eval_results.json")) as f:
    final = json.load(f)
  keys = spec.get("eval_results.json")
  metrics = final if keys is None else {k: final[k] for k in keys if k in final}
  if "metrics.jsonl" in spec:
    metrics["eval_by_step"] = {}
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      for row in map(json.loads, f):
        kept = {k: row[k] for k in spec["metrics.jsonl"] if k in row}
        if kept:
          metrics["eval_by_step"][str(row["step"])] = kept
  return metrics


def _argv(cmd: list[str]) -> list[str]:
  """A recorded command as run here: "python" is this interpreter."""
  return [sys.executable, *cmd[1:]] if cmd[0] == "python" else cmd


def _execute(cmd: list[str], log_path: str) -> int:
  """Runs cmd, its output to the terminal and to log_path; returns the exit code."""
  with open(log_path, "w") as log:
    process = subprocess.Popen(_argv(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    for line in process.stdout:
      sys.stdout.write(line)
      log.write(line)
    return process.wait()


def _mentions(text: str, path: str) -> bool:
  """Whether `text` (commands) names `path` itself, not a longer path that starts with it."""
  return re.search(re.escape(path) + r"(?![\w.-])", text) is not None


def _prepare(name: str, module, print_only: bool,
             commands: list[list[str]] | None = None) -> None:
  """Runs the sweep's PREPARE commands whose outputs are missing: without `commands`, the
  files (corpus, vocabularies: get_sweep may read them) and the prepared models (outputs
  `DIR/eval_results.json`) that a missing file's command names (a tagger that annotates
  the corpus); with them (the runs to do), the prepared models that one of them names,
  so that a sweep over two models can run one model's runs without the other."""
  prepare = getattr(module, "PREPARE", ())
  text = (" ".join(" ".join(cmd) for cmd in commands) if commands is not None else
          " ".join(cmd for out, cmd in prepare
                   if not out.endswith("/eval_results.json") and not os.path.exists(out)))

  def needed(out):
    if not out.endswith("/eval_results.json"):
      return commands is None
    return _mentions(text, os.path.dirname(out))
  missing = [(out, cmd) for out, cmd in prepare
             if not os.path.exists(out) and needed(out)]
  if missing and print_only:
    raise SystemExit(f"sweep {name} needs {', '.join(out for out, _ in missing)} first: "
                     + " && ".join(cmd for _, cmd in missing))
  for out, cmd in missing:
    print(f"== prepare {out}: {cmd}", flush=True)
    if subprocess.run(_argv(shlex.split(cmd))).returncode:
      raise SystemExit(f"prepare failed: {cmd}")


def _execute_in_fresh_workdir(cmd: list[str], workdir: str) -> str | None:
  """Runs a train command in a fresh workdir (log: WORKDIR.log); None, or why it failed."""
  shutil.rmtree(workdir, ignore_errors=True)
  os.makedirs(os.path.dirname(workdir), exist_ok=True)
  code = _execute(cmd, f"{workdir}.log")
  if code:
    return f"exit code {code}"
  if not os.path.exists(os.path.join(workdir, "eval_results.json")):
    return "no eval_results.json"
  return None


def _report_total(workdirs: list[str]) -> dict | None:
  """The run reports of these workdirs summed (None if none has one)."""
  invocations = []
  for workdir in workdirs:
    path = os.path.join(workdir, run_report.FILENAME)
    if os.path.exists(path):
      with open(path) as f:
        invocations += json.load(f)["invocations"]
  return run_report.total(invocations) if invocations else None


def _run(sweep: str, run: str, spec: dict, metrics_spec: dict,
         fingerprint_: str) -> dict | None:
  """Runs one run (its train command, then its stages); its results row, or None if a
  command failed."""
  workdir = f"runs/{sweep}/{run}"
  commands = [(None, command(sweep, run, spec))] + stage_commands(sweep, run, spec)
  revision = git_revision()
  start = time.time()
  metrics = {}
  for stage, cmd in commands:
    stage_workdir = workdir if stage is None else f"{workdir}.{stage}"
    print(f"== {run}{'' if stage is None else '.' + stage}: {shlex.join(cmd)}", flush=True)
    failure = _execute_in_fresh_workdir(cmd, stage_workdir)
    if failure:
      print(f"== {run} failed ({failure}); log in {stage_workdir}.log", file=sys.stderr,
            flush=True)
      return None
    if stage is None:
      metrics = collect_metrics(workdir, metrics_spec)
    else:
      keys = spec["stages"][stage].get("metrics")
      metrics[stage] = collect_metrics(stage_workdir, {"eval_results.json": keys})
  seconds = time.time() - start
  row = {"sweep": sweep, "run": run, "command": shlex.join(commands[0][1]),
         "git_revision": revision, "wall_seconds": round(seconds, 1),
         "finished_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
             timespec="seconds"),
         "metrics": metrics, "fingerprint": fingerprint_}
  if len(commands) > 1:
    row["stage_commands"] = {stage: shlex.join(cmd) for stage, cmd in commands[1:]}
  # The run's compute, energy and CO2e, summed over its stages and resumes.
  total = _report_total([workdir] + [f"{workdir}.{stage}" for stage, _ in commands[1:]])
  if total is not None:
    row["report"] = total
  return row


def reads(sweep: str, specs: dict) -> dict[str, list[str]]:
  """run -> the other runs of the sweep whose workdir its commands read (a distillation
  student reads its teacher's: `configs/distilbert.py:teacher=runs/SWEEP/TEACHER`)."""
  found = {}
  for run, spec in specs.items():
    text = " ".join(" ".join(cmd) for cmd in
                    [command(sweep, run, spec)] + [c for _, c in stage_commands(sweep, run, spec)])
    found[run] = [other for other in specs if other != run and
                  _mentions(text, f"runs/{sweep}/{other}")]
  return found


def with_missing_dependencies(sweep: str, todo: list[str],
                              dependencies: dict[str, list[str]]) -> list[str]:
  """todo, each run preceded by the runs it reads whose workdir is not here (finished:
  with eval_results.json), so that a run whose teacher has a row from another machine
  trains that teacher again first instead of failing."""
  out = []
  for run in todo:
    for other in dependencies[run]:
      if other not in out and not os.path.exists(
          os.path.join("runs", sweep, other, "eval_results.json")):
        print(f"{other} runs first: {run} reads runs/{sweep}/{other}, which is not here",
              file=sys.stderr)
        out.append(other)
    if run not in out:
      out.append(run)
  return out


def save_row(path: str, row: dict, order: list[str]) -> None:
  """Adds row to the results file (replacing the run's old row), rows in sweep order."""
  rows = [r for r in sweeps.read_results(path) if r["run"] != row["run"]] + [row]
  rows.sort(key=lambda r: order.index(r["run"]) if r["run"] in order else len(order))
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
  os.replace(path + ".tmp", path)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("sweep", help=f"one of: {', '.join(sweeps.names())}")
  parser.add_argument("runs", nargs="*", help="runs of the sweep (default: all, in order)")
  parser.add_argument("--print", dest="print_only", action="store_true",
                      help="print the commands, one per line; run nothing")
  parser.add_argument("--force", action="store_true", help="re-run runs that have a row")
  parser.add_argument("--results", help="results file (default experiments/results/SWEEP.jsonl)")
  args = parser.parse_intermixed_args(argv)  # flags before or among the runs

  module = sweeps.load(args.sweep)
  _prepare(args.sweep, module, args.print_only)
  specs = module.get_sweep()
  unknown = [run for run in args.runs if run not in specs]
  if unknown:
    near = sorted({m for run in unknown for m in difflib.get_close_matches(run, specs, n=3)})
    raise SystemExit(f"unknown run(s) {', '.join(unknown)} in sweep {args.sweep} ("
                     f"{len(specs)} runs; `--print` shows each one's command)"
                     + (f"; did you mean {', '.join(near)}?" if near else ""))
  path = args.results or sweeps.results_path(args.sweep)
  done = {row["run"] for row in sweeps.read_results(path)}
  runs = args.runs or list(specs)
  todo = [run for run in runs if args.force or run not in done]
  _prepare(args.sweep, module, args.print_only,
           [cmd for run in todo for cmd in [command(args.sweep, run, specs[run])]
            + [c for _, c in stage_commands(args.sweep, run, specs[run])]])
  for run in runs:
    if run not in todo:
      print(f"skip {run}: it has a row in {path} (--force re-runs it)", file=sys.stderr)
  dependencies = reads(args.sweep, specs)
  if not args.print_only:
    todo = with_missing_dependencies(args.sweep, todo, dependencies)
  read_by_todo = {other for run in todo for other in dependencies[run]}
  failed = []
  for run in todo:
    if args.print_only:
      print(shlex.join(command(args.sweep, run, specs[run])))
      for _, cmd in stage_commands(args.sweep, run, specs[run]):
        print(shlex.join(cmd))
      continue
    metrics_spec = getattr(module, "METRICS", {"eval_results.json": None})
    fingerprint_ = fingerprint(args.sweep, run, specs[run], metrics_spec)
    # A run others read must train here: a row reused from another sweep leaves no workdir.
    same = None if args.force or run in read_by_todo else _same_run(
        os.path.dirname(os.path.abspath(path)), fingerprint_)
    if same is not None:
      origin = same.get("same_as", f"{same['sweep']}/{same['run']}")
      print(f"== {run}: the same run as {origin} (fingerprint {fingerprint_}): its row is "
            f"reused (--force runs it)", flush=True)
      row = {**same, "sweep": args.sweep, "run": run, "same_as": origin}
    else:
      row = _run(args.sweep, run, specs[run], metrics_spec, fingerprint_)
    if row is None:
      failed.append(run)
    else:
      save_row(path, row, list(specs))
  if failed:
    raise SystemExit(f"{len(failed)} of {len(todo)} runs failed: {' '.join(failed)}")


if __name__ == "__main__":
  main()
