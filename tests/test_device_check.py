"""bench/device_check.sh --dry: the device check's code path (compile, plan, timed steps,
JSON with device, date and commit; the fine-tuning row; the small run from pre-tokenized
shards) at tiny shapes on the CPU, so the script is known to run the day an accelerator is
at hand, and with no TensorFlow imported."""
import json
import math
import os
import subprocess

import pytest

from tests.helpers.runs import tiny_pretraining_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_device_check_dry_run_writes_every_row(corpus, tmp_path):
  from bert_jax.pretrain import shards
  from bert_jax.text.tokenizers import make_tokenizer
  config = tiny_pretraining_config(corpus)
  shards.write_shards(config.data, make_tokenizer(config.data), str(tmp_path / "tiny"), 1)
  out = tmp_path / "check.json"
  env = {**os.environ, "PYTHONPATH": REPO, "BERT_JAX_SHARDS": str(tmp_path / "tiny-train-*")}
  result = subprocess.run(["bash", "bench/device_check.sh", "--dry", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(out.read_text())
  assert report["dry"] and report["platform"] == "cpu" and report["commit"]
  assert report["tensorflow_imported"] is False
  rows = {(row["model"], row["attention_impl"]): row for row in report["rows"]}
  assert set(rows) == {("bert-base", "einsum"), ("bert-base", "xla"),
                       ("modernbert-base", "einsum"), ("bert-base-sst2", "einsum")}
  for row in rows.values():
    assert "error" not in row, row
    assert row["tokens_per_s_per_device"] > 0 and 0 < row["mfu"] < 1
    assert row["plan_peak_bytes_per_device"] > 0 and row["seq"] == 128
    assert row["examples_per_s"] > 0
  run = report["train_from_shards"]
  assert run["steps"] == 3 and run["seq"] == 32, run
  assert math.isfinite(run["first_loss"]) and math.isfinite(run["last_loss"])
