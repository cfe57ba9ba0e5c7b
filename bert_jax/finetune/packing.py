"""Sequence packing for fine-tuning: several short examples per row, nothing shared.

  packed = pack(features, max_per_row=8)     # numpy in, numpy out (jax-free)
  packed["input_ids"]       # [R, T] the examples' tokens side by side, then padding
  packed["segment_ids"]     # [R, T] 1, 2, ... per example, 0 on padding
  packed["positions"]       # [R, T] 0, 1, ... restarting at each example
  packed["cls_positions"]   # [R, K] where each example's [CLS] is (0 in empty slots)
  packed["example_index"]   # [R, K] the example's row in `features` (-1: empty slot)
  packed["example_mask"]    # [R, K] 1.0 real example, 0.0 empty slot
  packed["label"]           # [R, K] every per-example feature, slot by slot

Each input row is one example ([CLS] ... [SEP], then padding; `attention_mask` marks its
tokens). Rows are filled best-fit in decreasing length (each example goes to the row it
fills most tightly, at most `max_per_row` per row), which leaves little padding on short-
sentence tasks. A model given a packed row attends only within each example and restarts
positions there (`BertModel(..., packing=...)`), so every example's outputs equal its
unpacked ones. Shape legend: N examples, R packed rows, T length, K = max_per_row.
"""
from collections.abc import Mapping

import numpy as np

TOKEN_KEYS = ("input_ids", "token_type_ids", "attention_mask")
PACKING_KEYS = ("segment_ids", "positions", "cls_positions")  # what the model reads


def assign_rows(lengths: np.ndarray, seq_len: int, max_per_row: int) -> list[list[int]]:
  """Example indices per row: best fit in decreasing length order."""
  if lengths.size and lengths.max() > seq_len:
    raise ValueError(f"packing: an example has {lengths.max()} tokens, more than the row "
                     f"length {seq_len}")
  rows: list[list[int]] = []
  by_space: dict[int, list[int]] = {}  # free tokens -> rows with that much room
  free: list[int] = []
  for example in np.argsort(-lengths, kind="stable"):
    n = int(lengths[example])
    space = next((s for s in range(n, seq_len + 1) if by_space.get(s)), None)
    if space is None:
      rows.append([])
      free.append(seq_len)
      row = len(rows) - 1
    else:
      row = by_space[space].pop()
    rows[row].append(int(example))
    free[row] -= n
    if len(rows[row]) < max_per_row and free[row] > 0:
      by_space.setdefault(free[row], []).append(row)
  return rows


def pack(features: Mapping[str, np.ndarray], max_per_row: int = 8,
         pad_id: int = 0) -> dict[str, np.ndarray]:
  """Unpacked rows -> packed rows (module docstring). Per-example features are those of
  shape [N]; token features are TOKEN_KEYS ([N, T])."""
  missing = [k for k in TOKEN_KEYS if k not in features]
  if missing:
    raise ValueError(f"packing: features lack {missing}")
  mask = np.asarray(features["attention_mask"])
  n, seq_len = mask.shape
  per_example = {k: np.asarray(v) for k, v in features.items()
                 if k not in TOKEN_KEYS and np.ndim(v) == 1}
  others = sorted(set(features) - set(TOKEN_KEYS) - set(per_example))
  if others:
    raise ValueError(f"packing: features {others} are neither [N] nor token features; "
                     "packing supports sequence classification (one label per example)")
  lengths = mask.sum(-1)
  rows = assign_rows(lengths, seq_len, max_per_row)
  r = len(rows)
  out = {k: np.zeros((r, seq_len), np.int32) for k in TOKEN_KEYS + ("segment_ids", "positions")}
  out["input_ids"][:] = pad_id
  out["cls_positions"] = np.zeros((r, max_per_row), np.int32)
  out["example_index"] = np.full((r, max_per_row), -1, np.int32)
  out["example_mask"] = np.zeros((r, max_per_row), np.float32)
  for key, values in per_example.items():
    out[key] = np.zeros((r, max_per_row), values.dtype)
  for row, examples in enumerate(rows):
    start = 0
    for slot, example in enumerate(examples):
      end = start + int(lengths[example])
      for key in TOKEN_KEYS:
        out[key][row, start:end] = features[key][example, :end - start]
      out["segment_ids"][row, start:end] = slot + 1
      out["positions"][row, start:end] = np.arange(end - start)
      out["cls_positions"][row, slot] = start
      out["example_index"][row, slot] = example
      out["example_mask"][row, slot] = 1.0
      for key, values in per_example.items():
        out[key][row, slot] = values[example]
      start = end
  return out


def fill_rate(features: Mapping[str, np.ndarray]) -> float:
  """Share of token positions that hold real tokens (packed or not)."""
  mask = np.asarray(features["attention_mask"])
  return float(mask.sum() / mask.size)
