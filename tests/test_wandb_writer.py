"""config.wandb_project: every metrics row also goes to a Weights & Biases run.

wandb runs for real here, in offline mode (WANDB_MODE=offline: its service process writes
the run's records to WORKDIR/wandb/offline-run-*/run-ID.wandb, as `wandb sync` later
uploads them). The tests read that file back (LevelDB's log framing: 32 KiB blocks of
records, each a 7-byte header of checksum, length and type; the payloads are wandb's own
`Record` protos) and compare its history rows with metrics.jsonl.
"""
import glob
import json
import os
import struct
import subprocess
import sys

import pytest

from bert_jax.run import metric_writers
from bert_jax.run import trainer
from tests.helpers.runs import tiny_pretraining_config

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402

BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path: str) -> list:
  """The Record protos of one .wandb file, in order."""
  data = open(path, "rb").read()
  assert data[:4] == b":W&B", path
  records, pending, pos = [], b"", 7
  while pos + 7 <= len(data):
    if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a header is padding
      pos += BLOCK - pos % BLOCK
      continue
    _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
    chunk = data[pos + 7:pos + 7 + length]
    pos += 7 + length
    if kind == FULL:
      records.append(chunk)
    elif kind in (FIRST, MIDDLE):
      pending = (b"" if kind == FIRST else pending) + chunk
    elif kind == LAST:
      records.append(pending + chunk)
    else:
      break
  out = []
  for payload in records:
    record = wandb_internal_pb2.Record()
    record.ParseFromString(payload)
    out.append(record)
  return out


def history(workdir: str) -> tuple[set, list[dict]]:
  """The run ids and the history rows ({key: value}, W&B's own _keys dropped) of every
  offline run under WORKDIR/wandb, oldest first."""
  ids, rows = set(), []
  paths = glob.glob(os.path.join(workdir, "wandb", "offline-run-*", "*.wandb"))
  for path in sorted(paths, key=os.path.getmtime):
    for record in read_records(path):
      kind = record.WhichOneof("record_type")
      if kind == "run":
        ids.add(record.run.run_id)
      if kind == "history":
        row = {"/".join(item.nested_key) or item.key: json.loads(item.value_json)
               for item in record.history.item}
        rows.append({k: v for k, v in row.items() if not k.startswith("_") or k == "_step"})
  return ids, rows


@pytest.fixture
def offline(monkeypatch, tmp_path):
  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_SILENT", "true")
  monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))
  monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb_cache"))
  monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb_data"))


def test_rows_reach_the_run_and_a_resumed_writer_keeps_its_id(offline, tmp_path):
  workdir = str(tmp_path / "run")
  writer = metric_writers.MetricWriter(workdir, wandb_project="bert-jax-test")
  writer.write(1, {"loss": 3.0, "learning_rate": 1e-4})
  writer.write(2, {"loss": 2.5, "note": "text is not a scalar"})
  writer.close()
  run_id = open(os.path.join(workdir, "wandb_run_id")).read().strip()
  writer = metric_writers.MetricWriter(workdir, wandb_project="bert-jax-test")  # resumed
  writer.write(3, {"loss": 2.0})
  writer.close()
  ids, rows = history(workdir)
  assert ids == {run_id}
  assert rows == [{"loss": 3.0, "learning_rate": 1e-4, "_step": 1},
                  {"loss": 2.5, "_step": 2}, {"loss": 2.0, "_step": 3}]


def test_a_pretraining_run_logs_its_metrics_rows(offline, corpus, tmp_path):
  workdir = str(tmp_path / "pretrain")
  config = tiny_pretraining_config(corpus, num_train_steps=3, checkpoint_every_steps=3)
  config.wandb_project = "bert-jax-test"
  trainer.train_and_evaluate(config, workdir)
  written = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
  _, rows = history(workdir)
  logged = {row["_step"]: row for row in rows}
  train_rows = [row for row in written if "loss" in row]
  assert [row["step"] for row in train_rows] == [1, 2, 3]
  for row in train_rows:
    assert logged[row["step"]]["loss"] == pytest.approx(row["loss"], rel=1e-6)


def test_without_wandb_the_run_says_what_to_install(monkeypatch, tmp_path):
  monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
  with pytest.raises(ValueError, match=r"config.wandb_project='p': .* needs the wandb "
                                       r"package \(pip install 'bert_jax\[wandb\]'\)"):
    metric_writers.MetricWriter(str(tmp_path), wandb_project="p")


def test_off_by_default_imports_nothing(tmp_path):
  code = ("import sys\nfrom bert_jax.run import metric_writers\n"
          f"metric_writers.MetricWriter({str(tmp_path)!r}).write(1, {{'loss': 1.0}})\n"
          "assert 'wandb' not in sys.modules\n")
  subprocess.run([sys.executable, "-c", code], check=True)
