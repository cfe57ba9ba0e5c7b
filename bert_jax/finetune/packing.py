"""Sequence packing for fine-tuning: several short examples per row, nothing shared.

  packed = pack(features, max_per_row=-1)    # numpy in, numpy out (jax-free)

The packed arrays (input_ids, segment_ids, positions, cls_positions, example_index,
example_mask, per-example features [R, K], per-token features [R, T]) are the layout of
bert_jax/packing.py, shared with pretraining's packed NSP/SOP pairs. Each input row is one
example ([CLS] ... [SEP], then padding; `attention_mask` marks its tokens). Rows are filled
best-fit in decreasing length (each example goes to the row it fills most tightly, at most
`max_per_row` per row; -1: as many as fit), which leaves little padding on short-sentence
tasks. A model given a packed row attends only within each example and restarts positions
there (`BertModel(..., packing=...)`), so every example's outputs equal its unpacked ones.
Shape legend: N examples, R packed rows, T length, K the most examples any row got
(<= max_per_row).

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

# Re-exported for the fine-tuning code that reads them (finetune/base.py, bench, tests).
from bert_jax.packing import PACKING_KEYS, TOKEN_KEYS, assign_rows, fill_rate, lay_out

__all__ = ["PACKING_KEYS", "TOKEN_KEYS", "assign_rows", "fill_rate", "pack", "unpack_tokens"]


def pack(features: Mapping[str, np.ndarray], max_per_row: int = -1,
         pad_id: int = 0) -> dict[str, np.ndarray]:
  """Unpacked rows -> packed rows (module docstring): best fit (assign_rows), K = the most
  examples any row got. Per-example features are those of shape [N]; token features are
  TOKEN_KEYS and any other [N, T]."""
  if "attention_mask" not in features:
    raise ValueError("packing: features lack ['attention_mask']")
  mask = np.asarray(features["attention_mask"])
  rows = assign_rows(mask.sum(-1), mask.shape[1], max_per_row)
  return lay_out(features, rows, max(map(len, rows), default=1), pad_id)


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

