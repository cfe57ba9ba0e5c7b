"""Sequence packing for fine-tuning: several short examples per row, nothing shared.

  packed = pack(features, max_per_row=-1)    # numpy in, numpy out (jax-free)

The packed arrays (input_ids, segment_ids, positions, cls_positions, example_index,
example_mask, per-example features [R, K], per-token features [R, T]) are the layout of
bert_jax/core/packed_rows.py, shared with pretraining's packed NSP/SOP pairs. Each input row is one
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

from bert_jax.finetune.array_input import ArrayInput
# Re-exported for the fine-tuning code that reads them (finetune/base.py, bench, tests).
from bert_jax.core.packed_rows import PACKING_KEYS, TOKEN_KEYS, assign_rows, fill_rate, lay_out

__all__ = ["PACKING_KEYS", "PackedBatches", "TOKEN_KEYS", "assign_rows", "fill_rate", "pack",
           "unpack_tokens"]


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


class PackedBatches:
  """Training batches of `global_batch_size` examples each, with their padding packed away.

  The examples of every batch, and their order across steps and epochs, are ArrayInput's
  (the same seed gives the same batches as unpacked training, so the same losses). Each
  process packs its share of a batch into rows of the full length T (assign_rows: best
  fit), then adds empty rows up to R, the most rows any process needed rounded up to a
  multiple of `rows_multiple` (at most its batch share): every process gets the same
  [R, T] shape, and the step compiles once per R. `widths()` lists the R of the first
  epoch's batches (`width_examples()` one batch of each), which a trainer compiles before
  its first step; a later epoch's reshuffle may need an R the first did not, and the step
  then compiles for it when it comes. Slots per row K: `max_per_row`, or (-1) the local
  batch size. On SST-2 (13.3 tokens an example) a batch of 32 takes ~8 rows of 64
  instead of 32 rows padded to ~45.

  state() / restore() are ArrayInput's (the position is counted in examples' batches).
  """

  def __init__(self, features: Mapping[str, np.ndarray], global_batch_size: int,
               seed: int = 0, *, process_index: int = 0, process_count: int = 1,
               max_per_row: int = -1, rows_multiple: int = 2, pad_id: int = 0,
               name: str = "features"):
    if global_batch_size % process_count:
      raise ValueError(f"batch_size={global_batch_size} does not divide by {process_count} "
                       "processes")
    if rows_multiple < 1:
      raise ValueError(f"config.data.packed_rows_multiple={rows_multiple}: expected >= 1")
    if "attention_mask" not in features:
      raise ValueError(f"{name}: packing needs an attention_mask feature")
    self._examples = ArrayInput(features, global_batch_size, seed, name=name)
    self.features = self._examples.features
    self.steps_per_epoch = self._examples.steps_per_epoch
    self.local_batch_size = global_batch_size // process_count
    self.process_index, self.process_count = process_index, process_count
    self.slots = max_per_row if max_per_row > 0 else self.local_batch_size
    assign_rows(np.zeros(0, np.int64), 1, max_per_row)  # validates max_per_row
    self.rows_multiple, self.pad_id = rows_multiple, pad_id
    self.seq_len = self.features["attention_mask"].shape[-1]
    self._first_epoch_rows = None

  def __iter__(self):
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    batch = next(self._examples)  # the global batch, unpacked
    lengths = batch["attention_mask"].sum(-1)
    b = self.local_batch_size
    shares = [assign_rows(lengths[p * b:(p + 1) * b], self.seq_len, self.slots)
              for p in range(self.process_count)]
    p = self.process_index
    local = {k: v[p * b:(p + 1) * b] for k, v in batch.items()}
    return self._pad_rows(lay_out(local, shares[p], self.slots, self.pad_id),
                          self._rows(max(map(len, shares))))

  def _rows(self, needed: int) -> int:
    m = self.rows_multiple
    return min(-(-needed // m) * m, self.local_batch_size)

  def _pad_rows(self, packed: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
    """Empty rows (padding tokens, no example in any slot) up to `rows`."""
    extra = rows - len(packed["input_ids"])
    out = {}
    for key, value in packed.items():
      fill = {"input_ids": self.pad_id, "example_index": -1}.get(key, 0)
      out[key] = np.concatenate(
          [value, np.full((extra,) + value.shape[1:], fill, value.dtype)]) if extra else value
    return out

  def widths(self) -> list[int]:
    """The row counts R of the first epoch's batches, ascending (each compiles once)."""
    if self._first_epoch_rows is None:
      lengths = self.features["attention_mask"].sum(-1)
      order, b = self._examples._order(0), self.local_batch_size
      rows = set()
      for step in range(self.steps_per_epoch):
        batch = lengths[order[step * b * self.process_count:(step + 1) * b * self.process_count]]
        rows.add(self._rows(max(len(assign_rows(batch[p * b:(p + 1) * b], self.seq_len,
                                                self.slots))
                                for p in range(self.process_count))))
      self._first_epoch_rows = sorted(rows)
    return self._first_epoch_rows

  def width_examples(self) -> list[dict[str, np.ndarray]]:
    """One local batch of each of `widths()` rows: shapes to compile for."""
    first = {k: v[:self.local_batch_size] for k, v in self.features.items()}
    return [self._pad_rows(lay_out(first, [[i] for i in range(r)], self.slots,
                                   self.pad_id), r) for r in self.widths()]

  def state(self) -> dict:
    return self._examples.state()

  def restore(self, state: Mapping) -> None:
    self._examples.restore(state)
