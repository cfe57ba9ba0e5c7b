"""Batches from in-memory feature arrays (fine-tuning sets), deterministic and resumable.

  train = ArrayInput(features, global_batch_size=32, seed=0, process_index=p,
                     process_count=n)
  batch = next(train)             # local rows of the next global batch, reshuffled per epoch
  saved = train.state()           # {"epoch", "step_in_epoch", ...}: JSON, goes in checkpoints
  train.restore(saved)            # the following batches equal an uninterrupted run's
  for batch in eval_input.epoch_batches(0): ...   # every row once, in order, padded

Epoch e's order is a permutation drawn from numpy Generator(seed, e); a training epoch
drops the last partial batch. `epoch_batches` of an unshuffled input (eval) visits every
row in order and pads the last batch by repeating row 0, with `valid` = 0 on padding rows
so scorers can drop them. Process p of n takes rows [p*B, (p+1)*B) of each global batch.

Dynamic padding (`pad_to_multiple_of` > 0): a batch, training or eval, is cut along the
sequence axis to its longest row (the last 1 of `attention_mask`, over the GLOBAL batch's
real rows, so every process gets the same shape), rounded up to a multiple of
`pad_to_multiple_of`. Sequence
features are those of two or more dims whose last axis is `attention_mask`'s. Padding
never changes a BERT's outputs at real positions, so this only saves compute; the step
compiles once per distinct length (at most max_seq_length / pad_to_multiple_of times);
`width_examples()` gives one batch of each length, so a trainer compiles them all before
its loop instead of stalling mid-run when a longer batch first comes. Per-token outputs of
cut eval batches differ in width: `pad_sequence_outputs` pads them back before they are
joined.
"""
from collections.abc import Iterator, Mapping

import numpy as np


class ArrayInput:
  """An endless, reshuffled-per-epoch iterator over the rows of `features`."""

  def __init__(self, features: Mapping[str, np.ndarray], global_batch_size: int, seed: int = 0,
               *, shuffle: bool = True, process_index: int = 0, process_count: int = 1,
               pad_to_multiple_of: int = 0, name: str = "features"):
    sizes = {k: len(v) for k, v in features.items()}
    if len(set(sizes.values())) != 1:
      raise ValueError(f"{name}: feature arrays have different lengths {sizes}")
    self.num_rows = next(iter(sizes.values()))
    if self.num_rows == 0:
      raise ValueError(f"{name}: no examples")
    if global_batch_size % process_count:
      raise ValueError(f"batch_size={global_batch_size} does not divide by {process_count} "
                       "processes")
    self.features = {k: np.asarray(v) for k, v in features.items()}
    self.global_batch_size = global_batch_size
    self.local_batch_size = global_batch_size // process_count
    self.seed, self.shuffle = seed, shuffle
    self.process_index = process_index
    self.steps_per_epoch = self.num_rows // global_batch_size
    if shuffle and self.steps_per_epoch == 0:
      raise ValueError(f"{name}: {self.num_rows} examples is fewer than one batch of "
                       f"{global_batch_size}")
    self._epoch, self._step = 0, 0
    self.pad_to_multiple_of = pad_to_multiple_of
    if pad_to_multiple_of:
      if "attention_mask" not in self.features:
        raise ValueError(f"{name}: pad_to_multiple_of needs an attention_mask feature")
      mask = self.features["attention_mask"]
      seq_len = mask.shape[-1]
      flat = mask.reshape(self.num_rows, -1, seq_len).any(axis=1)  # [N, T] any choice
      self._row_lengths = np.where(flat.any(-1), seq_len - np.argmax(flat[:, ::-1], -1), 0)
      self._sequence_keys = [k for k, v in self.features.items()
                             if v.ndim >= 2 and v.shape[-1] == seq_len]

  def _order(self, epoch: int) -> np.ndarray:
    if not self.shuffle:
      return np.arange(self.num_rows)
    return np.random.default_rng([self.seed, epoch]).permutation(self.num_rows)

  def _local(self, rows: np.ndarray) -> dict[str, np.ndarray]:
    start = self.process_index * self.local_batch_size
    mine = rows[start:start + self.local_batch_size]
    return {k: v[mine] for k, v in self.features.items()}

  def __iter__(self):
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    if self._step >= self.steps_per_epoch:
      self._epoch, self._step = self._epoch + 1, 0
    order = self._order(self._epoch)
    rows = order[self._step * self.global_batch_size:(self._step + 1) * self.global_batch_size]
    self._step += 1
    batch = self._local(rows)
    return self._cut(batch, rows)

  def _cut(self, batch: dict, real_rows: np.ndarray) -> dict:
    """batch's sequence features cut to the width of real_rows (dynamic padding)."""
    if self.pad_to_multiple_of:
      keep = self._width(int(self._row_lengths[real_rows].max()))
      for key in self._sequence_keys:
        batch[key] = batch[key][..., :keep]
    return batch

  def widths(self) -> list[int]:
    """The sequence widths training batches can have (dynamic padding), ascending."""
    seq_len = self.features["attention_mask"].shape[-1]
    if not self.pad_to_multiple_of:
      return [seq_len]
    return sorted({self._width(int(n)) for n in np.unique(self._row_lengths)})

  def _width(self, longest: int) -> int:
    """A batch's width: its longest row rounded up to pad_to_multiple_of (<= the length)."""
    multiple = self.pad_to_multiple_of
    seq_len = self.features["attention_mask"].shape[-1]
    return min(-(-max(longest, 1) // multiple) * multiple, seq_len)

  def width_examples(self) -> list[dict[str, np.ndarray]]:
    """One local batch (the first rows) cut to each of `widths()`: shapes to compile for."""
    rows = np.arange(self.local_batch_size) % self.num_rows
    batch = {k: v[rows] for k, v in self.features.items()}
    if not self.pad_to_multiple_of:
      return [batch]
    return [{k: v[..., :w] if k in self._sequence_keys else v for k, v in batch.items()}
            for w in self.widths()]

  def epoch_batches(self, epoch: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Every row of the epoch once (padded last batch, `valid` marks real rows), each batch
    cut to its real rows' width under dynamic padding."""
    order = self._order(epoch)
    for start in range(0, self.num_rows, self.global_batch_size):
      rows = real = order[start:start + self.global_batch_size]
      valid = np.ones(self.global_batch_size, np.int32)
      if len(rows) < self.global_batch_size:
        valid[len(rows):] = 0
        rows = np.concatenate([rows, np.zeros(self.global_batch_size - len(rows), rows.dtype)])
      batch = self._cut(self._local(rows), real)
      start_local = self.process_index * self.local_batch_size
      batch["valid"] = valid[start_local:start_local + self.local_batch_size]
      yield batch

  def state(self) -> dict:
    return {"epoch": self._epoch, "step_in_epoch": self._step, "seed": self.seed,
            "batch_size": self.global_batch_size, "num_rows": self.num_rows}

  def restore(self, state: Mapping) -> None:
    for key, mine in (("seed", self.seed), ("batch_size", self.global_batch_size),
                      ("num_rows", self.num_rows)):
      if int(state[key]) != mine:
        raise ValueError(f"checkpointed input has {key}={state[key]}, this run has {mine}")
    self._epoch, self._step = int(state["epoch"]), int(state["step_in_epoch"])


def pad_sequence_outputs(chunks: list[dict], keys, width: int, fill) -> list[dict]:
  """Eval outputs of batches cut to different widths, each of `keys` ([B, W, ...]) padded
  with `fill` along axis 1 to `width` (the features' max_seq_length), as uncut batches'."""
  return [{k: (np.pad(v, [(0, 0), (0, width - v.shape[1])] + [(0, 0)] * (v.ndim - 2),
                      constant_values=fill) if k in keys else v) for k, v in c.items()}
          for c in chunks]
