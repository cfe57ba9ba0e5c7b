"""TensorBoard event files without tensorboard (bert_jax/run/metric_writers.py): the bytes
of each record equal tensorboard's own RecordWriter and Event protos, and TensorBoard's
reader gets every scalar back from a MetricWriter's file. The optional Weights & Biases
writer, in wandb's offline mode: its run file, read back through wandb's own Record proto,
holds every row at its step."""
import glob
import io
import json
import math
import struct
import time

import pytest

from bert_jax.run import metric_writers


@pytest.mark.parametrize("step,scalars", [
    (0, None), (7, {"loss": 2.5, "eval_mlm_accuracy": 0.0}),
    (2**40, {"x": 1e39, "y": -1e-3, "nan": math.nan})])
def test_event_records_are_tensorboards_bytes(step, scalars):
  event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
  from tensorboard.compat.proto import summary_pb2
  from tensorboard.summary.writer.record_writer import RecordWriter
  wall_time = 1764640000.25
  theirs = event_pb2.Event(wall_time=wall_time, step=step)
  if scalars is None:
    theirs.file_version = "brain.Event:2"
  else:
    theirs.summary.CopyFrom(summary_pb2.Summary(value=[
        summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in scalars.items()]))
  buffer = io.BytesIO()
  RecordWriter(buffer).write(theirs.SerializeToString())
  ours = metric_writers.event(wall_time, step, "brain.Event:2" if scalars is None else "",
                              scalars)
  assert metric_writers.record(ours) == buffer.getvalue()


def test_tensorboard_reads_a_metric_writers_file(tmp_path):
  loader = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
  writer = metric_writers.MetricWriter(str(tmp_path))
  writer.write(1, {"loss": 3.0, "lr": 1e-4})
  writer.write(2, {"loss": 2.0, "note": "text is not a scalar"})
  [path] = glob.glob(str(tmp_path / "tensorboard" / "events.out.tfevents.*"))
  events = list(loader.LegacyEventFileLoader(path).Load())  # raw events
  assert events[0].file_version == "brain.Event:2"
  got = [(e.step, v.tag, round(v.simple_value, 6))
         for e in events[1:] for v in e.summary.value]
  assert got == [(1, "loss", 3.0), (1, "lr", 1e-4), (2, "loss", 2.0)]


# wandb's run file (`run-ID.wandb`): a 7-byte header (":W&B", magic, version), then
# LevelDB-log chunks in 32 KiB blocks (crc32, length, type), each record a protobuf
# wandb_internal_pb2.Record split over FULL, or FIRST / MIDDLE... / LAST chunks.
WANDB_BLOCK, WANDB_FULL, WANDB_LAST = 32768, 1, 4


def wandb_records(path: str) -> list:
  from wandb.proto import wandb_internal_pb2
  with open(path, "rb") as f:
    data = f.read()
  assert data[:4] == b":W&B", data[:7]
  records, pending, pos = [], b"", 7
  while pos + 7 <= len(data):
    left = WANDB_BLOCK - pos % WANDB_BLOCK
    _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
    if left < 7 or kind == 0:  # a block's zero-padded tail
      pos += left
      continue
    if pos + 7 + length > len(data):  # a chunk still being written
      break
    pending += data[pos + 7:pos + 7 + length]
    pos += 7 + length
    if kind in (WANDB_FULL, WANDB_LAST):
      records.append(wandb_internal_pb2.Record.FromString(pending))
      pending = b""
  return records


def finished_wandb_records(path: str, seconds: float = 60) -> list:
  """The file's records once its last is the run's exit record: wandb's service process
  writes the file shortly after finish() returns."""
  deadline = time.time() + seconds
  records = wandb_records(path)
  while (not records or records[-1].WhichOneof("record_type") != "exit") and (
      time.time() < deadline):
    time.sleep(0.2)
    records = wandb_records(path)
  return records


def wandb_settings(**fields):
  settings = metric_writers.wandb_config()
  settings.update(fields)
  return settings


def test_wandb_offline_run_holds_every_row_at_its_step(tmp_path, monkeypatch):
  monkeypatch.setenv("WANDB_SILENT", "true")
  workdir = tmp_path / "tiny_run"
  writer = metric_writers.MetricWriter(
      str(workdir), wandb_settings=wandb_settings(project="bert-jax-test", mode="offline"),
      run_config={"seed": 3, "optim": {"learning_rate": 1e-3}})
  writer.write(5, {"loss": 2.5, "learning_rate": 1e-3})
  writer.write(10, {"loss": 2.0, "learning_rate": 5e-4, "note": "text is not a scalar"})
  writer.close()
  [path] = glob.glob(str(workdir / "wandb" / "offline-run-*" / "run-*.wandb"))
  records = finished_wandb_records(path)
  kinds = [r.WhichOneof("record_type") for r in records]
  history = [{"/".join(item.nested_key) or item.key: json.loads(item.value_json)
              for item in r.history.item} for r in records if r.HasField("history")]
  assert [(h["_step"], h["loss"], h["learning_rate"]) for h in history] == [
      (5, 2.5, 1e-3), (10, 2.0, 5e-4)]
  assert "note" not in history[1]
  run = records[kinds.index("run")].run
  assert (run.project, run.display_name) == ("bert-jax-test", "tiny_run")
  config = {"/".join(item.nested_key) or item.key: json.loads(item.value_json)
            for r in records if r.HasField("run") for item in r.run.config.update}
  assert config["seed"] == 3 and config["optim"] == {"learning_rate": 1e-3}
  assert kinds[-1] == "exit", kinds  # finished by close()


def test_wandb_is_off_by_default_and_refuses_what_it_cannot_do(tmp_path):
  writer = metric_writers.MetricWriter(str(tmp_path), wandb_settings=wandb_settings())
  writer.write(1, {"loss": 1.0})
  writer.close()
  assert not (tmp_path / "wandb").exists()
  metric_writers.check_wandb(wandb_settings(mode="on"), "gs://bucket/run")  # off: not read
  with pytest.raises(ValueError, match=r"config.wandb.dir: .* gs://bucket/run is a URL"):
    metric_writers.check_wandb(wandb_settings(project="p"), "gs://bucket/run")
  metric_writers.check_wandb(wandb_settings(project="p", dir=str(tmp_path)), "gs://bucket/run")
  with pytest.raises(ValueError, match=r"config.wandb.mode='on': expected one of"):
    metric_writers.WandbRun(wandb_settings(project="p", mode="on"), str(tmp_path))
  assert not (tmp_path / "wandb").exists()
