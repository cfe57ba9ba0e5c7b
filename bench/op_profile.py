"""Where a jitted step's time goes, by model op: a jax.profiler trace of a few calls,
each XLA op's time added to the model op it came from (the compiled HLO's op_name
metadata; layer numbers folded, "bwd" marking the backward's transposes).

Used by bench/finetune_split.py and bench/train_step.py (`--profile_ops=N`). The times
are op time: ops that the CPU runs side by side each count in full, so the groups add up
to more than the wall time.
"""
import collections
import glob
import gzip
import json
import os
import re
import tempfile

import jax


def op_groups(hlo_text: str) -> dict[str, str]:
  """HLO instruction name -> "fwd|bwd <the last parts of its op_name>"."""
  groups = {}
  for line in hlo_text.splitlines():
    name, op = re.match(r"\s*(?:ROOT )?%(\S+) = ", line), re.search(r'op_name="([^"]*)"', line)
    if name and op:
      path = re.sub(r"layer_\d+", "layer_*", op.group(1))
      parts = [p for p in path.split("/")
               if not p.startswith(("jit(", "jvp(", "transpose("))][-3:]
      groups[name.group(1)] = ("bwd " if "transpose(" in path else "fwd ") + "/".join(parts)
  return groups


def costliest(hlo_text: str, run, calls: int, top: int) -> list[tuple[float, str]]:
  """[(ms per call, op group)] of the `top` costliest groups over `calls` calls of run()
  (each waits for its result; run must execute the executable hlo_text describes)."""
  groups = op_groups(hlo_text)
  run()  # warm
  with tempfile.TemporaryDirectory() as trace_dir:
    jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
    for _ in range(calls):
      run()
    jax.profiler.stop_trace()
    (trace,) = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    with gzip.open(trace) as f:
      events = json.load(f)["traceEvents"]
  totals = collections.Counter()
  for event in events:
    if event.get("ph") == "X" and event["name"] in groups:
      totals[groups[event["name"]]] += event.get("dur", 0) / 1000 / calls
  return [(ms, group) for group, ms in totals.most_common(top)]


def print_costliest(title: str, rows: list[tuple[float, str]]) -> None:
  print(f"{title}, the {len(rows)} costliest op groups (ms of op time per call):")
  for ms, group in rows:
    print(f"  {ms:8.2f}  {group}")
