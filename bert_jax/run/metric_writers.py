"""Where training metrics go: WORKDIR/metrics.jsonl, TensorBoard events, a progress line.

Only process 0 writes. metrics.jsonl holds one JSON object per logged step (train rows,
and eval rows whose keys carry an `eval_` prefix).
"""
import json
import os
import time


class MetricWriter:
  """Writes metrics rows; `truncate_after(step)` drops rows a resumed run will redo."""

  def __init__(self, workdir: str, enabled: bool = True):
    self.enabled = enabled
    self.path = os.path.join(workdir, "metrics.jsonl")
    self._tb = None
    if enabled:
      os.makedirs(workdir, exist_ok=True)
      import tensorflow as tf  # tf.summary writes the TensorBoard event files
      self._tf = tf
      self._tb = tf.summary.create_file_writer(os.path.join(workdir, "tensorboard"))

  def truncate_after(self, step: int) -> None:
    """Keeps only rows with row["step"] <= step (rows after a checkpoint are redone)."""
    if not self.enabled or not os.path.exists(self.path):
      return
    with open(self.path) as f:
      rows = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
    with open(self.path, "w") as f:
      f.writelines(rows)

  def write(self, step: int, metrics: dict) -> None:
    if not self.enabled:
      return
    row = {"step": int(step), **{k: _scalar(v) for k, v in metrics.items()},
           "time": time.time()}
    with open(self.path, "a") as f:
      f.write(json.dumps(row) + "\n")
    with self._tb.as_default(step=int(step)):
      for k, v in row.items():
        if k not in ("step", "time") and isinstance(v, (int, float)):
          self._tf.summary.scalar(k, v)
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
