"""Sequence packing for fine-tuning: several short examples per row, nothing shared.

  packed = pack(features, max_per_row=-1)    # numpy in, numpy out (jax-free)
  packed["input_ids"]       # [R, T] the examples' tokens side by side, then padding
  packed["segment_ids"]     # [R, T] 1, 2, ... per example, 0 on padding
  packed["positions"]       # [R, T] 0, 1, ... restarting at each example
  packed["cls_positions"]   # [R, K] where each example's [CLS] is (0 in empty slots)
  packed["example_index"]   # [R, K] the example's row in `features` (-1: empty slot)
  packed["example_mask"]    # [R, K] 1.0 real example, 0.0 empty slot
  packed["label"]           # [R, K] every per-example feature [N], slot by slot
  packed["labels"]          # [R, T] every per-token feature [N, T] (tagging), like input_ids

Each input row is one example ([CLS] ... [SEP], then padding; `attention_mask` marks its
tokens). Rows are filled best-fit in decreasing length (each example goes to the row it
fills most tightly, at most `max_per_row` per row; -1: as many as fit), which leaves little
padding on short-sentence tasks. A model given a packed row attends only within each
example and restarts positions there (`BertModel(..., packing=...)`), so every example's
outputs equal its unpacked ones. Shape legend: N examples, R packed rows, T length,
K the most examples any row got (<= max_per_row).

Fill (real tokens / positions) of SST-2 train, all-MiniLM-L6-v2's tokenizer, 67,349
examples of 13.3 tokens on average (bench/packing_fill.py):
  T=64:  unpacked 0.208; K=8 0.939 (a fifth of the rows stop at the cap); K=16 0.996;
         K=-1 0.998 (at most 21 per row)
  T=128: unpacked 0.104; K=8 0.714; K=16 0.933; K=-1 0.997 (at most 42 per row)
CoNLL-2003 train (14,041 sentences, 19.9 tokens) at its T=128: unpacked 0.156; K=8 0.877;
K=-1 0.998.
"""
from collections.abc import Mapping

import numpy as np

TOKEN_KEYS = ("input_ids", "token_type_ids", "attention_mask")
PACKING_KEYS = ("segment_ids", "positions", "cls_positions")  # what the model reads


def assign_rows(lengths: np.ndarray, seq_len: int, max_per_row: int) -> list[list[int]]:
  """Example indices per row: best fit in decreasing length order, at most max_per_row
  per row (-1: no cap)."""
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


def pack(features: Mapping[str, np.ndarray], max_per_row: int = -1,
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
  token_keys = TOKEN_KEYS + tuple(sorted(
      k for k, v in features.items() if k not in TOKEN_KEYS and np.shape(v) == (n, seq_len)))
  others = sorted(set(features) - set(token_keys) - set(per_example))
  if others:
    raise ValueError(f"packing: features {others} are neither per example [N] nor per "
                     f"token [N, T={seq_len}]")
  lengths = mask.sum(-1)
  rows = assign_rows(lengths, seq_len, max_per_row)
  r = len(rows)
  max_per_row = max(map(len, rows), default=1)  # K: the slots some row uses
  out = {k: np.zeros((r, seq_len), np.int32) for k in ("segment_ids", "positions")}
  out.update({k: np.zeros((r, seq_len), np.asarray(features[k]).dtype) for k in token_keys})
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
      for key in token_keys:
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


def unpack_tokens(packed: Mapping[str, np.ndarray], values: np.ndarray,
                  num_examples: int) -> np.ndarray:
  """[R, T, ...] per-token outputs of packed rows -> [N, T, ...] in the unpacked layout
  (each example's tokens from position 0, zeros after them)."""
  out = np.zeros((num_examples,) + values.shape[1:], values.dtype)
  lengths = (packed["segment_ids"][..., None] == np.arange(1, packed["example_index"].shape[1]
                                                          + 1)).sum(1)  # [R, K]
  for row, slot in zip(*np.nonzero(packed["example_index"] >= 0)):
    start, length = packed["cls_positions"][row, slot], lengths[row, slot]
    out[packed["example_index"][row, slot], :length] = values[row, start:start + length]
  return out


def fill_rate(features: Mapping[str, np.ndarray]) -> float:
  """Share of token positions that hold real tokens (packed or not)."""
  mask = np.asarray(features["attention_mask"])
  return float(mask.sum() / mask.size)
