"""bench/device_check.sh --dry: the device check's code path (compile, plan, timed steps,
JSON with device, date and commit) at tiny shapes on the CPU, so the script is known to run
the day an accelerator is at hand."""
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_device_check_dry_run_writes_every_row(tmp_path):
  out = tmp_path / "check.json"
  env = {**os.environ, "PYTHONPATH": REPO}
  result = subprocess.run(["bash", "bench/device_check.sh", "--dry", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(out.read_text())
  assert report["dry"] and report["platform"] == "cpu" and report["commit"]
  rows = {(row["model"], row["attention_impl"]): row for row in report["rows"]}
  assert set(rows) == {("bert-base", "einsum"), ("bert-base", "xla"),
                       ("modernbert-base", "einsum")}
  for row in rows.values():
    assert "error" not in row, row
    assert row["tokens_per_s_per_device"] > 0 and 0 < row["mfu"] < 1
    assert row["plan_peak_bytes_per_device"] > 0 and row["seq"] == 128
