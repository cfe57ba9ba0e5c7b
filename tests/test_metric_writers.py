"""TensorBoard event files without tensorboard (bert_jax/run/metric_writers.py): the bytes
of each record equal tensorboard's own RecordWriter and Event protos, and TensorBoard's
reader gets every scalar back from a MetricWriter's file."""
import glob
import io
import math

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
