"""Where training metrics go: WORKDIR/metrics.jsonl, TensorBoard events, a progress line.

Only process 0 writes. metrics.jsonl holds one JSON object per logged step (train rows,
and eval rows whose keys carry an `eval_` prefix). Both files go through `bert_jax.files.storage`,
so a gs:// workdir gets them in the bucket: the event records are TensorBoard's own format
(tensorboard's RecordWriter and Event protos), appended at each write.
"""
import io
import json
import socket
import time

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

from bert_jax.files import storage


class EventFile:
  """WORKDIR/tensorboard/events.out.tfevents.<time>.<host>: scalars, one event per value."""

  def __init__(self, logdir: str):
    storage.makedirs(logdir)
    self.path = storage.join(logdir, f"events.out.tfevents.{int(time.time())}."
                             f"{socket.gethostname()}")
    self._pending = io.BytesIO()
    self._records = RecordWriter(self._pending)
    self._add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
    self.flush()

  def _add(self, event) -> None:
    self._records.write(event.SerializeToString())

  def scalars(self, step: int, values: dict) -> None:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=k, simple_value=v)
                                         for k, v in values.items()])
    self._add(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

  def flush(self) -> None:
    storage.append_bytes(self.path, self._pending.getvalue())
    self._pending.seek(0)
    self._pending.truncate()


class MetricWriter:
  """Writes metrics rows; `truncate_after(step)` drops rows a resumed run will redo."""

  def __init__(self, workdir: str, enabled: bool = True):
    self.enabled = enabled
    self.path = storage.join(workdir, "metrics.jsonl")
    self._tb = None
    if enabled:
      storage.makedirs(workdir)
      self._tb = EventFile(storage.join(workdir, "tensorboard"))

  def truncate_after(self, step: int) -> None:
    """Keeps only rows with row["step"] <= step (rows after a checkpoint are redone)."""
    if not self.enabled or not storage.exists(self.path):
      return
    rows = [line for line in storage.read_text(self.path).splitlines(keepends=True)
            if line.strip() and json.loads(line)["step"] <= step]
    storage.write_text(self.path, "".join(rows))

  def write(self, step: int, metrics: dict) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: _scalar(v) for k, v in metrics.items()},
           "time": time.time()}
    storage.append_bytes(self.path, (json.dumps(row) + "\n").encode())
    self._tb.scalars(int(step), {k: v for k, v in row.items()
                                 if k not in ("step", "time") and isinstance(v, (int, float))})
    self._tb.flush()


def _scalar(v):
  try:
    return float(v)
  except (TypeError, ValueError):
    return v


def format_progress(step: int, total: int, metrics: dict, seconds_left: float) -> str:
  """One human line: step, loss, accuracies, learning rate, tokens/s, ETA."""
  parts = [f"step {step}/{total}"]
  for key in ("loss", "mlm_loss", "mlm_accuracy", "nsp_accuracy", "accuracy"):
    if key in metrics:
      parts.append(f"{key} {float(metrics[key]):.4f}")
  if "learning_rate" in metrics:
    parts.append(f"lr {float(metrics['learning_rate']):.2e}")
  if "tokens_per_sec" in metrics:
    parts.append(f"{float(metrics['tokens_per_sec']):,.0f} tok/s")
  if "fill_rate" in metrics:  # the share of those positions that are real tokens
    parts.append(f"fill {float(metrics['fill_rate']):.2f}")
  parts.append(f"ETA {format_duration(seconds_left)}")
  return " | ".join(parts)


def format_duration(seconds: float) -> str:
  """'42s', '5m07s', '3h05m', '4d06h': the two largest units, for a human."""
  seconds = int(max(seconds, 0))
  minutes, s = divmod(seconds, 60)
  hours, m = divmod(minutes, 60)
  days, h = divmod(hours, 24)
  if days:
    return f"{days}d{h:02d}h"
  if hours:
    return f"{hours}h{m:02d}m"
  return f"{minutes}m{s:02d}s" if minutes else f"{s}s"
