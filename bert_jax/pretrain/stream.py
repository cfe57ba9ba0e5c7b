"""One data shard's endless, resumable stream of pretraining rows (see pretraining.py).

Epoch e of shard k: the example builder's instances drawn with numpy Generator(seed, e, k)
over the shard's documents, fully permuted; each global step takes the next `rows_per_step` of them (this
process's slice of those when several processes share the shard), packed and masked in
tf.data. Positions are (epoch, step); the next epoch is built in the background. With
static masking (dupe_factor N > 0) epoch e repeats epoch e mod N exactly.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Iterator

import numpy as np

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.pretrain import builders
from bert_jax.pretrain import masking
from bert_jax.text import corpus as corpus_lib

_BATCHES_PER_MAP = 8


@dataclasses.dataclass(frozen=True)
class _EpochRows:
  """One epoch's rows of one shard for this process, in step order (n = steps * rows)."""
  rows: builders.Rows        # unmasked
  example_index: np.ndarray  # int64 [n], masking-noise index (position in the shard's epoch list)
  steps: int
  span_tags: np.ndarray | None = None  # int32 [n, T]: the rows' span tags (corpus has them)


class ShardStream:
  """One shard's endless, resumable stream of row blocks (its share of each global step)."""

  def __init__(self, corpus: corpus_lib.TokenizedCorpus, shard: int, num_shards: int,
               rows_per_step: int, slice_index: int, slice_count: int, seed: int,
               builder: builders.ExampleBuilder, builder_options,
               masking_options: masking.MaskingOptions, special_ids: builders.SpecialIds,
               max_seq_length: int, dupe_factor: int = 0):
    self.corpus, self.shard, self.num_shards = corpus, shard, num_shards
    self.rows_per_step = rows_per_step            # of this shard, all slices
    self.local_rows = rows_per_step // slice_count  # of this process
    self.slice_index, self.seed = slice_index, seed
    self.dupe_factor = dupe_factor
    self.max_seq_length = max_seq_length
    self._builder, self._builder_options = builder, builder_options
    self._masking_options = masking_options
    self._special_ids = special_ids
    # Background work: one thread builds epochs' rows, one opens the next epoch's
    # tf.data iterator (0.3 s) so that crossing an epoch boundary does not stall.
    self._row_builder = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    self._iterator_opener = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    # _finish_rows traced once per stream, the epoch a tensor argument: every epoch's
    # pipeline calls the same graph function instead of tracing the masking again
    # (~0.5 s an epoch). Traced as written, without autograph, as every tf.data function
    # here: it branches only on Python values.
    self._finish = tf.function(self._finish_rows, autograph=False)
    self._epoch_futures: dict[int, concurrent.futures.Future] = {}
    self._next_epoch_batches: tuple[int, concurrent.futures.Future] | None = None
    self.epoch, self.step = 0, 0
    self._batches: Iterator[dict] | None = None

  def move_to(self, epoch: int, step: int) -> None:
    self.epoch, self.step, self._batches = epoch, step, None

  def steps_in_epoch(self, epoch: int) -> int:
    return self._epoch_rows(epoch).steps

  def __next__(self) -> dict[str, np.ndarray]:
    while True:
      if self._batches is None:
        self._batches = self._open_epoch(self.epoch, self.step)
      batch = next(self._batches, None)
      if batch is not None:
        self.step += 1
        if self.step >= self.steps_in_epoch(self.epoch):
          self._next_epoch()
        return batch
      self._next_epoch()  # only when restored to the very end of an epoch

  def _next_epoch(self) -> None:
    self._epoch_futures.pop(self.epoch, None)
    self.move_to(self.epoch + 1, 0)

  def _open_epoch(self, epoch: int, start_step: int) -> Iterator[dict[str, np.ndarray]]:
    """This epoch's blocks (opened in the background if it was foreseen); foresees the next."""
    upcoming, self._next_epoch_batches = self._next_epoch_batches, None
    if upcoming is not None and upcoming[0] == epoch and start_step == 0:
      batches = upcoming[1].result()
    elif start_step > self.steps_in_epoch(epoch):
      raise ValueError(f"position step {start_step} of epoch {epoch} is past its "
                       f"{self.steps_in_epoch(epoch)} steps (data shard {self.shard})")
    else:
      batches = self.epoch_batches(epoch, start_step)
    next_rows = self._epoch_rows(epoch + 1, wait=False)
    self._next_epoch_batches = (epoch + 1, self._iterator_opener.submit(
        lambda: self._batches_from_rows(next_rows.result(), 0, epoch + 1)))
    return batches

  def epoch_batches(self, epoch: int, start_step: int = 0,
                    mask_epoch: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    return self._batches_from_rows(self._epoch_rows(epoch), start_step,
                                   epoch if mask_epoch is None else mask_epoch)

  def _batches_from_rows(self, rows: _EpochRows, start_step: int,
                         mask_epoch: int) -> Iterator[dict[str, np.ndarray]]:
    first = start_step * self.local_rows
    columns = {"input_ids": rows.rows.input_ids[first:],
               "token_type_ids": rows.rows.token_type_ids[first:],
               "lengths": rows.rows.lengths[first:],
               "example_index": rows.example_index[first:],
               "labels": {k: v[first:] for k, v in rows.rows.labels.items()},
               "packing": {k: v[first:] for k, v in rows.rows.packing.items()}}
    if rows.span_tags is not None:
      columns["span_tags"] = rows.span_tags[first:]
    # Rows are finished _BATCHES_PER_MAP blocks at a time (fewer, bigger TF ops), then
    # cut into blocks; a row's content never depends on this grouping.
    data_epoch = self._data_epoch(mask_epoch)
    dataset = (tf.data.Dataset.from_tensor_slices(columns)
               .batch(self.local_rows * _BATCHES_PER_MAP)
               .map(tf.autograph.experimental.do_not_convert(
                   lambda block: self._finish(tf.constant(data_epoch, tf.int64), block)),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
               .rebatch(self.local_rows, drop_remainder=True)
               .prefetch(tf.data.AUTOTUNE))
    return dataset.as_numpy_iterator()

  def _finish_rows(self, data_epoch, block):
    # data_epoch: int64 scalar (_data_epoch's). block: input_ids, token_type_ids [R, T];
    # lengths, example_index [R]; labels {[R]}; packing {[R, T]} (packed rows: segment_ids,
    # positions); span_tags [R, T] when the corpus has them.
    position = tf.range(self.max_seq_length)[None, :]
    attention_mask = position < block["lengths"][:, None]
    options = self._masking_options
    noise = masking.example_noise(self.seed, data_epoch, block["example_index"],
                                  masking.noise_size(self.max_seq_length, options))
    masked = masking.mask_batch(block["input_ids"], noise, options, block.get("span_tags"))
    tags = ({"span_tags": tf.cast(block["span_tags"], tf.int32)}
            if options.span_fields and "span_tags" in block else {})
    return {
        "input_ids": masked["input_ids"],
        "token_type_ids": tf.cast(block["token_type_ids"], tf.int32),
        "attention_mask": tf.cast(attention_mask, tf.int32),
        "masked_lm_positions": masked["masked_lm_positions"],
        "masked_lm_ids": masked["masked_lm_ids"],
        "masked_lm_weights": masked["masked_lm_weights"],
        **{field: masked[field] for field in masking.SPAN_FIELDS if field in masked},
        **tags,
        **block["labels"],
        **{k: tf.cast(v, tf.int32) for k, v in block["packing"].items()},
    }

  def _data_epoch(self, epoch: int) -> int:
    """The epoch whose examples, order and masks epoch `epoch` uses: itself (dynamic), or
    with static masking (dupe_factor N) epoch mod N, so only N versions of the data exist."""
    return epoch % self.dupe_factor if self.dupe_factor else epoch

  def epoch_rows(self, epoch: int) -> _EpochRows:
    """The epoch's rows for this process in step order, unmasked (waits for them)."""
    return self._epoch_rows(epoch)

  def _epoch_rows(self, epoch: int, wait: bool = True):
    """The epoch's rows (wait=True), or the future of them."""
    if epoch not in self._epoch_futures:
      self._epoch_futures[epoch] = self._row_builder.submit(self._build_epoch_rows, epoch)
    return self._epoch_futures[epoch].result() if wait else self._epoch_futures[epoch]

  def _build_epoch_rows(self, epoch: int) -> _EpochRows:
    rng = np.random.default_rng([self.seed, self._data_epoch(epoch), self.shard])
    instances = self._builder.instances(self.corpus, self._builder_options, rng)
    order = rng.permutation(len(instances))
    steps = len(instances) // self.rows_per_step
    if steps == 0:
      where = f" (data shard {self.shard} of {self.num_shards})" if self.num_shards > 1 else ""
      raise corpus_lib.CorpusError(
          f"{len(instances)} examples from {', '.join(self.corpus.sources[:4])}{where} do "
          f"not fill one batch of {self.rows_per_step}")
    # Shard-list positions of this process's rows, step by step: [steps, local rows].
    local_positions = (np.arange(steps)[:, None] * self.rows_per_step
                       + self.slice_index * self.local_rows
                       + np.arange(self.local_rows)[None, :]).reshape(-1)
    local = instances.take(order[local_positions])
    span_tags = None
    if self.corpus.span_tags is not None:  # laid out as the ids are; 0 at special tokens
      span_tags = self._builder.rows(local, self.corpus.tags_as_tokens(), self._builder_options,
                                     builders.SpecialIds(pad=0, cls=0, sep=0)).input_ids
    return _EpochRows(
        rows=self._builder.rows(local, self.corpus, self._builder_options, self._special_ids),
        span_tags=span_tags,
        # Distinct over shards, and the shard-list position itself when there is one shard.
        example_index=(local_positions * self.num_shards + self.shard).astype(np.int64),
        steps=steps)
