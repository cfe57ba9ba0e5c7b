"""bench/input_pipeline.py --sweep: the rule-made span file, the rows it times, and one
small sweep end to end (two child processes, one pinned to a core)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from bert_jax.text import spans as spans_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench", "input_pipeline.py")
_spec = importlib.util.spec_from_file_location("input_pipeline", BENCH)
input_pipeline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(input_pipeline)


def test_rule_spans_are_a_valid_span_file(tmp_path):
  """Capitalised runs are entities, the other words phrases of up to three; blank lines
  have none; the file reads back through text/spans.py's checks."""
  text = tmp_path / "corpus.txt"
  text.write_text("Harry Potter lives in the big old house\n\nit rains in New York today\n",
                  encoding="utf-8")
  input_pipeline.write_rule_spans(str(text))
  lines = open(spans_lib.span_path(str(text)), encoding="utf-8").read().splitlines()
  assert [json.loads(line)["spans"] for line in lines] == [
      [[0, 2, "entity"], [2, 5, "phrase"], [5, 8, "phrase"]],
      [],
      [[3, 5, "entity"], [0, 3, "phrase"], [5, 6, "phrase"]]]
  for number, (raw, line) in enumerate(zip(lines, text.read_text().splitlines()), 1):
    spans_lib.parse_line(raw, len(line.split()), f"line {number}")


def test_sweep_rows_cover_every_scheme_and_builder_once():
  class Args:
    schemes = builders = ""
  rows = input_pipeline.sweep_rows(Args)
  schemes = list(input_pipeline.selectors.SELECTORS)
  names = list(input_pipeline.builders.BUILDERS)
  assert rows == [(m, names[0]) for m in schemes] + [(schemes[0], b) for b in names[1:]]
  Args.schemes = "token,spam"
  with pytest.raises(ValueError, match="--schemes: 'spam' is not one of"):
    input_pipeline.sweep_rows(Args)


def test_host_table_divides_what_a_host_eats_by_the_stream():
  one = [{"masking": "token", "builder": "nsp_pairs", "both_tokens_per_cpu_s": 100_000.0},
         {"masking": "span", "builder": "nsp_pairs", "both_tokens_per_cpu_s": 50_000.0}]
  every = [{"masking": "token", "builder": "nsp_pairs", "stream_tokens_per_s": 300_000.0},
           {"masking": "span", "builder": "nsp_pairs", "stream_tokens_per_s": 120_000.0}]
  table = input_pipeline.host_table(128, one, every, 2).splitlines()
  v5e = next(line for line in table if line.startswith("| TPU v5e host"))
  eats = 82_623 * 4  # the v5e-16 row's tokens/s per chip x 4 chips
  assert f"| {eats:,} |" in v5e
  assert f"| 120k .. 300k ({120_000 / eats:.1%} .. {300_000 / eats:.1%}) |" in v5e
  assert v5e.endswith(f"| {eats / 50_000:,.1f} .. {eats / 100_000:,.1f} |")  # span .. token


@pytest.mark.slow
def test_a_small_sweep_runs_on_one_core_and_on_all(tmp_path):
  words = "the cat sat on a mat and then it ran to London with John Smith".split()
  documents = [" ".join(words[(d + s) % 5:] + words[:(d + s) % 5]) + " ."
               for d in range(40) for s in range(4)]
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n\n".join("\n".join(documents[d * 4:(d + 1) * 4]) for d in range(40))
                    + "\n", encoding="utf-8")
  out = subprocess.run(
      [sys.executable, BENCH, "--sweep", f"--corpus={corpus}", "--batch_size=8",
       "--max_seq_length=32", "--max_predictions_per_seq=5", "--batches=3",
       "--schemes=entity", "--builders=nsp_pairs,token_stream"],
      check=True, capture_output=True, text=True, cwd=REPO, timeout=600).stdout
  assert out.startswith("machine: ") and "load average" in out
  assert not os.path.exists(spans_lib.span_path(str(corpus)))  # written beside a copy
  result = json.loads(out.strip().splitlines()[-1])
  assert sorted(result) == ["cores_1", f"cores_{len(os.sched_getaffinity(0))}"]
  for rows in result.values():
    assert [(r["masking"], r["builder"]) for r in rows] == [
        ("entity", "nsp_pairs"), ("entity", "token_stream")]
    for r in rows:
      assert 0 < r["both_tokens_per_cpu_s"] < min(r["stream_tokens_per_cpu_s"],
                                                  r["build_tokens_per_cpu_s"])
      assert r["stream_tokens_per_s"] > 0 and r["build_tokens_per_s"] > 0
  assert "| TPU v5p host | 4 |" not in out  # seq 32: no plan row to compare with
