"""Packed rows: several examples side by side in one row, nothing shared (jax-free).

One layout for every packed batch, fine-tuning's (bert_jax/finetune/example_packing.py) and
pretraining's NSP/SOP pairs (bert_jax/pretrain/builders.py) alike:

  rows = assign_rows(lengths, seq_len, max_per_row)   # which examples share a row
  packed = lay_out(features, rows, slots)              # numpy in, numpy out
  packed["input_ids"]       # [R, T] the examples' tokens side by side, then padding
  packed["segment_ids"]     # [R, T] 1, 2, ... per example, 0 on padding
  packed["positions"]       # [R, T] 0, 1, ... restarting at each example
  packed["cls_positions"]   # [R, K] where each example's [CLS] is (0 in empty slots)
  packed["example_index"]   # [R, K] the example's row in `features` (-1: empty slot)
  packed["example_mask"]    # [R, K] 1.0 real example, 0.0 empty slot
  packed["label"]           # [R, K] every per-example feature [N], slot by slot
  packed["labels"]          # [R, T] every per-token feature [N, T] (tagging), like input_ids

Each input row is one example ([CLS] ... [SEP], then padding; `attention_mask` marks its
tokens). A model given PACKING_KEYS of a packed row attends only within each example,
restarts positions there and reads each example's [CLS] at cls_positions
(`BertModel(..., packing=...)`: the pooled output is [R, K, H], so sentence-level heads
give [R, K, C]); a loss weighs slot k by example_mask, so it is the mean over real
examples exactly as unpacked. Shape legend: N examples, R packed rows, T length, K slots
per row.
"""
from collections.abc import Mapping, Sequence

import numpy as np

TOKEN_KEYS = ("input_ids", "token_type_ids", "attention_mask")
PACKING_KEYS = ("segment_ids", "positions", "cls_positions")  # what the model reads


def assign_rows(lengths: np.ndarray, seq_len: int, max_per_row: int) -> list[list[int]]:
  """Example indices per row: best fit in decreasing length order (each example goes to the
  row it fills most tightly), at most max_per_row per row (-1: no cap)."""
  if max_per_row == 0 or max_per_row < -1:
    raise ValueError(f"config.data.packing={max_per_row}: expected the most examples per row "
                     "(> 0), or -1 for as many as fit")
  cap = max_per_row if max_per_row > 0 else seq_len
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
    if len(rows[row]) < cap and free[row] > 0:
      by_space.setdefault(free[row], []).append(row)
  return rows


def lay_out(features: Mapping[str, np.ndarray], rows: Sequence[Sequence[int]], slots: int,
            pad_id: int = 0) -> dict[str, np.ndarray]:
  """Unpacked rows [N, ...] -> the module docstring's packed rows, `rows[r]` the examples of
  row r (assign_rows) in slot order, K = `slots` >= the most any row holds. Per-example
  features are those of shape [N]; token features TOKEN_KEYS and any other [N, T]."""
  missing = [k for k in TOKEN_KEYS if k not in features]
  if missing:
    raise ValueError(f"packing: features lack {missing}")
  mask = np.asarray(features["attention_mask"])
  n, seq_len = mask.shape
  per_example = {k: np.asarray(v) for k, v in features.items()
                 if k not in TOKEN_KEYS and np.ndim(v) == 1}
  token_keys = TOKEN_KEYS + tuple(sorted(
      k for k, v in features.items() if k not in TOKEN_KEYS and np.shape(v) == (n, seq_len)))
  others = sorted(set(features) - set(token_keys) - set(per_example))
  if others:
    raise ValueError(f"packing: features {others} are neither per example [N] nor per "
                     f"token [N, T={seq_len}]")
  if max(map(len, rows), default=0) > slots:
    raise ValueError(f"packing: a row holds {max(map(len, rows))} examples, more than its "
                     f"{slots} slots")
  lengths = mask.sum(-1)
  r = len(rows)
  out = {k: np.zeros((r, seq_len), np.int32) for k in ("segment_ids", "positions")}
  out.update({k: np.zeros((r, seq_len), np.asarray(features[k]).dtype) for k in token_keys})
  out["input_ids"][:] = pad_id
  out["cls_positions"] = np.zeros((r, slots), np.int32)
  out["example_index"] = np.full((r, slots), -1, np.int32)
  out["example_mask"] = np.zeros((r, slots), np.float32)
  for key, values in per_example.items():
    out[key] = np.zeros((r, slots), values.dtype)
  # Flat over the P placed examples, row by row in slot order (no Python loop: pretraining
  # lays out every epoch's pairs this way).
  counts = np.fromiter(map(len, rows), np.int64, r)
  example = np.fromiter((e for row in rows for e in row), np.int64, int(counts.sum()))
  row_of = np.repeat(np.arange(r), counts)                       # [P]
  row_first = np.repeat(np.cumsum(counts) - counts, counts)      # [P] the row's first in P
  slot = np.arange(len(example)) - row_first                     # [P]
  length = lengths[example].astype(np.int64)                     # [P]
  before = np.cumsum(length) - length                            # [P] tokens before, all rows
  start = before - before[row_first]                             # [P] offset in its row
  end = start + length
  if (end > seq_len).any():
    first = int(np.argmax(end > seq_len))
    raise ValueError(f"packing: row {int(row_of[first])}'s examples hold {int(end[first])} "
                     f"tokens, more than the row length {seq_len}")
  # Every example's tokens are the first `length` of its row, and every packed row's are its
  # first `used`: the tokens, taken in placement order, fill the packed rows in order.
  taken = np.arange(seq_len)[None, :] < length[:, None]                      # [P, T]
  used = np.zeros(r, np.int64)
  np.add.at(used, row_of, length)
  filled = np.arange(seq_len)[None, :] < used[:, None]                       # [R, T]
  for key in token_keys:
    out[key][filled] = np.asarray(features[key])[example][taken]
  out["segment_ids"][filled] = np.repeat(slot + 1, length)
  out["positions"][filled] = np.nonzero(taken)[1]
  out["cls_positions"][row_of, slot] = start
  out["example_index"][row_of, slot] = example
  out["example_mask"][row_of, slot] = 1.0
  for key, values in per_example.items():
    out[key][row_of, slot] = values[example]
  return out


def take_rows(row_of: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Items laid out in rows -> those of rows `indices`, in that order.

  row_of: int [I] each item's row, ascending (rows 0 .. R-1, none empty); indices: int [M].
  Returns (the chosen items' indices into row_of, their rows renumbered 0 .. M-1)."""
  splits = np.searchsorted(row_of, np.arange(int(row_of[-1]) + 2 if len(row_of) else 1))
  counts = (splits[1:] - splits[:-1])[indices]
  first = np.repeat(splits[:-1][indices] - np.cumsum(counts) + counts, counts)
  return first + np.arange(counts.sum()), np.repeat(np.arange(len(indices)), counts)


def fill_rate(features: Mapping[str, np.ndarray]) -> float:
  """Share of token positions that hold real tokens (packed or not)."""
  mask = np.asarray(features["attention_mask"])
  return float(mask.sum() / mask.size)
