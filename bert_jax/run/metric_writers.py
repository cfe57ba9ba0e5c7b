"""Where training metrics go: WORKDIR/metrics.jsonl, TensorBoard events, a progress line.

Only process 0 writes. metrics.jsonl holds one JSON object per logged step (train rows,
and eval rows whose keys carry an `eval_` prefix). Both files go through `bert_jax.files.storage`,
so a gs:// workdir gets them in the bucket: the event records are TensorBoard's own format,
appended at each write. They are encoded here (an Event proto of a wall time, a step and
scalar Summary values, in TFRecord framing with masked CRC-32C checksums; the bytes equal
tensorboard's RecordWriter and Event protos, tests/test_metric_writers.py), so training
needs neither TensorFlow nor tensorboard.

Weights & Biases is a third, optional writer: off unless `config.wandb.project` names a
project; `wandb` is imported only then (`pip install ".[wandb]"`; not a dependency).
"""
import importlib.util
import io
import json
import os
import socket
import struct
import time

import ml_collections

from bert_jax.files import storage


# ------------------------------------------------------------------ the event encoding
def _crc32c_table() -> list[int]:
  table = []
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # CRC-32C (Castagnoli), reflected
    table.append(crc)
  return table


_CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
  """TFRecord's checksum: CRC-32C of `data`, rotated right by 15 and offset."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
  """One TFRecord: length, its checksum, the data, its checksum."""
  length = struct.pack("<Q", len(data))
  return (length + struct.pack("<I", masked_crc32c(length)) + data
          + struct.pack("<I", masked_crc32c(data)))


def _varint(value: int) -> bytes:
  out = bytearray()
  while True:
    low, value = value & 0x7F, value >> 7
    out.append(low | (0x80 if value else 0))
    if not value:
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protobuf field (wire type 2)."""
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def event(wall_time: float, step: int = 0, file_version: str = "",
          scalars: dict | None = None) -> bytes:
  """tensorboard's Event proto, serialized: wall_time (1, double), step (2, int64),
  file_version (3), summary (5: Summary, whose values (1) are tag (1) and simple_value (2,
  float)); fields at their default are left out, as protobuf does."""
  out = b"\x09" + struct.pack("<d", wall_time)
  if step:
    out += _varint(2 << 3) + _varint(step & 0xFFFFFFFFFFFFFFFF)
  if file_version:
    out += _field(3, file_version.encode())
  if scalars is not None:
    values = b"".join(_field(1, _field(1, tag.encode()) + b"\x15" + _float32(value))
                      for tag, value in scalars.items())
    out += _field(5, values)
  return out


def _float32(value: float) -> bytes:
  """value as a little-endian float32; beyond its range, infinity (as protobuf stores it)."""
  try:
    return struct.pack("<f", value)
  except OverflowError:
    return struct.pack("<f", float("inf") if value > 0 else float("-inf"))


# ------------------------------------------------------------------ the writers
class EventFile:
  """WORKDIR/tensorboard/events.out.tfevents.<time>.<host>: scalars, one event per value."""

  def __init__(self, logdir: str):
    storage.makedirs(logdir)
    self.path = storage.join(logdir, f"events.out.tfevents.{int(time.time())}."
                             f"{socket.gethostname()}")
    self._pending = io.BytesIO()
    self._pending.write(record(event(time.time(), file_version="brain.Event:2")))
    self.flush()

  def scalars(self, step: int, values: dict) -> None:
    self._pending.write(record(event(time.time(), step, scalars=values)))

  def flush(self) -> None:
    storage.append_bytes(self.path, self._pending.getvalue())
    self._pending.seek(0)
    self._pending.truncate()


def wandb_config() -> ml_collections.ConfigDict:
  """config.wandb: where the Weights & Biases writer logs (off while `project` is "")."""
  return ml_collections.ConfigDict(dict(
      project="",  # a W&B project: every metrics row is logged to a run of it ("" = off)
      entity="",  # the project's W&B entity, a team or user ("" = the account's default)
      mode="online",  # "online", or "offline" (files only; `wandb sync DIR` uploads them later)
      name="",  # the W&B run's display name ("" = the workdir's folder name)
      dir="",  # the local folder wandb writes its files under ("" = the workdir, if local)
  ))


WANDB_MODES = ("online", "offline")


def check_wandb(settings, workdir: str) -> None:
  """Refuses, before anything is written, W&B settings that cannot work: an unknown mode, a
  URL as wandb's folder (it writes local files), wandb not installed. Off: nothing to check."""
  if settings is None or not settings.project:
    return
  if settings.mode not in WANDB_MODES:
    raise ValueError(f"config.wandb.mode={settings.mode!r}: expected one of {WANDB_MODES}")
  if storage.is_url(settings.dir or workdir):
    raise ValueError(f"config.wandb.dir: wandb writes local files, and the workdir {workdir} "
                     "is a URL: name a local folder (--config.wandb.dir=PATH)")
  if importlib.util.find_spec("wandb") is None:
    raise ValueError(f"config.wandb.project={settings.project!r} asks for Weights & Biases, "
                     "but wandb is not installed (pip install \".[wandb]\")")


class WandbRun:
  """One W&B run of a training invocation: each metrics row is logged at its step, its
  numeric values only (as TensorBoard gets them); `run_config` is the W&B run's config.
  A resumed invocation is a new W&B run whose steps continue."""

  def __init__(self, settings, workdir: str, run_config: dict | None = None):
    check_wandb(settings, workdir)
    try:
      import wandb
    except ImportError as error:  # found by check_wandb, but it does not import
      raise ValueError(f"config.wandb.project={settings.project!r}: wandb does not import "
                       f"({error})") from error
    folder = settings.dir or workdir
    os.makedirs(folder, exist_ok=True)
    self._run = wandb.init(
        project=settings.project, entity=settings.entity or None, mode=settings.mode,
        name=settings.name or os.path.basename(os.path.normpath(workdir)), dir=folder,
        config=run_config, reinit="finish_previous")

  def log(self, step: int, values: dict) -> None:
    self._run.log(values, step=step)

  def finish(self) -> None:
    self._run.finish()


class MetricWriter:
  """Writes metrics rows; `truncate_after(step)` drops rows a resumed run will redo.

  wandb_settings: a `wandb_config()` whose project is set also logs every row to Weights &
  Biases (process 0 only, as the files), with `run_config` as the W&B run's config."""

  def __init__(self, workdir: str, enabled: bool = True, wandb_settings=None,
               run_config: dict | None = None):
    self.enabled = enabled
    self.path = storage.join(workdir, "metrics.jsonl")
    self._tb = None
    self._wandb = None
    if enabled:
      storage.makedirs(workdir)
      self._tb = EventFile(storage.join(workdir, "tensorboard"))
      if wandb_settings is not None and wandb_settings.project:
        self._wandb = WandbRun(wandb_settings, workdir, run_config)

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
    numbers = {k: v for k, v in row.items()
               if k not in ("step", "time") and isinstance(v, (int, float))}
    self._tb.scalars(int(step), numbers)
    self._tb.flush()
    if self._wandb is not None:
      self._wandb.log(int(step), numbers)

  def close(self) -> None:
    """Finishes the W&B run, if any (the files need nothing: each write is appended)."""
    if self._wandb is not None:
      self._wandb.finish()
      self._wandb = None


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
