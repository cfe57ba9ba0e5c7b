"""The pretraining input: corpus -> NSP pairs per epoch -> dynamic masking -> batches.

Use (the trainer):

  train_input, eval_input = pretraining.make_inputs(
      config.data, process_index=jax.process_index(), process_count=jax.process_count())
  train_input.restore(saved["data"])        # optional; resumes exactly where it was
  batch = next(train_input)                  # one local batch, the contract below
  saved["data"] = train_input.state()        # JSON-able dict, save it with the train state
  for batch in eval_input.epoch_batches(0):  # eval_input is None without held-out data
    ...                                      # the same fixed batches on every call

Batch contract (numpy; B = batch_size // process_count local rows, T = max_seq_length,
P = max_predictions_per_seq):
  input_ids            int32   [B, T]  [CLS] A [SEP] B [SEP] [PAD]..., masks applied
  token_type_ids       int32   [B, T]  0 for [CLS] A [SEP], 1 for B [SEP], 0 for padding
  attention_mask       int32   [B, T]  1 real token, 0 padding
  masked_lm_positions  int32   [B, P]  ascending; 0 in unused slots
  masked_lm_ids        int32   [B, P]  original ids; 0 in unused slots
  masked_lm_weights    float32 [B, P]  1.0 real prediction, 0.0 unused slot
  next_sentence_labels int32   [B]     0 IsNext (B is the true continuation), 1 NotNext

Position, determinism, resumption. Epoch e's instances are a pure function of (seed, e):
nsp_pairs.build_pair_instances with numpy Generator(seed, e) over the whole corpus, then a
full permutation (no shuffle buffer). Global step s of the epoch holds instances
[s*G, (s+1)*G) of that list (G = batch_size; the remainder is dropped) and process p takes
rows [s*G + p*B, s*G + (p+1)*B). Masking noise comes from (seed, e, global example index)
(masking.py). Every process builds the same list, so all agree on `steps_in_epoch(e)`,
which varies a little from epoch to epoch. The position is (epoch, step_in_epoch) of the
next batch: `state()` returns it as {"epoch", "step_in_epoch"} plus "seed", "batch_size"
and "corpus_tokens" to check against, `restore(state)` moves there, and the batches that
follow are exactly those an uninterrupted run would have seen. The next epoch's pairs are built
in a background thread while the current one is consumed.

Fields read from config.data (`default_data_config()` gives them with defaults):
  data_dir             data root for relative paths; "" -> paths.default_data_dir()
  train_files          globs of plain-format files (prepare.py); or, when empty:
  tfds_name            a tfds dataset whose examples are documents, with
  tfds_split, tfds_text_field, tfds_data_dir ("" -> tfds's default)
  eval_files           globs of held-out plain-format files, or
  eval_held_out_docs   this many training documents (a fixed random choice) held out
  vocab_path, lower_case                  the WordPiece tokenizer
  max_seq_length, max_predictions_per_seq T and P
  masked_lm_prob, mask_token_prob, random_token_prob   15% selected; 80/10/10 of those
  short_seq_prob, random_next_prob        NSP pair sampling (nsp_pairs.py)
  seed, batch_size                        batch_size is global (all processes)
  cache_dir            "" -> no cache; else tokenized corpora are kept there as .npz
"""
import concurrent.futures
import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator

import ml_collections
import numpy as np
import tensorflow as tf

from bert_jax.data import corpus as corpus_lib
from bert_jax.data import masking
from bert_jax.data import nsp_pairs
from bert_jax.data import paths
from bert_jax.data import tokenizer as tokenizer_lib

_CACHE_FORMAT_VERSION = 2  # bump when corpus.py changes what it produces
_BATCHES_PER_MAP = 8
_HELD_OUT_STREAM = 7_777  # Generator stream for the held-out document choice


def default_data_config() -> ml_collections.ConfigDict:
  """config.data with every field this module reads (see the module docstring)."""
  return ml_collections.ConfigDict({
      "data_dir": "",
      "train_files": (),
      "tfds_name": "",
      "tfds_split": "train",
      "tfds_text_field": "text",
      "tfds_data_dir": "",
      "eval_files": (),
      "eval_held_out_docs": 0,
      "vocab_path": "bert/uncased_L-12_H-768_A-12/vocab.txt",
      "lower_case": True,
      "max_seq_length": 128,
      "max_predictions_per_seq": 20,
      "masked_lm_prob": 0.15,
      "mask_token_prob": 0.8,
      "random_token_prob": 0.1,
      "short_seq_prob": 0.1,
      "random_next_prob": 0.5,
      "seed": 0,
      "batch_size": 32,
      "cache_dir": "",
  })


@dataclasses.dataclass(frozen=True)
class _EpochRows:
  """One epoch's local rows, in step order (n = steps * local batch)."""
  input_ids: np.ndarray      # int32 [n, T], unmasked
  a_lengths: np.ndarray      # int32 [n]
  b_lengths: np.ndarray      # int32 [n]
  labels: np.ndarray         # int32 [n], 1 = NotNext
  example_index: np.ndarray  # int64 [n], position in the epoch's global list
  steps: int


class PretrainingInput:
  """An endless, resumable iterator of local pretraining batches (module docstring)."""

  def __init__(self, corpus: corpus_lib.TokenizedCorpus, tokenizer, data_config,
               *, process_index: int = 0, process_count: int = 1):
    corpus.check_usable_for_nsp()
    if data_config.batch_size % process_count:
      raise ValueError(f"batch_size {data_config.batch_size} is not divisible by "
                       f"process_count {process_count}")
    if data_config.seed < 0:
      raise ValueError(f"seed must be >= 0, got {data_config.seed}")
    if not 0 <= process_index < process_count:
      raise ValueError(f"process_index {process_index} not in [0, {process_count})")
    self.corpus = corpus
    self.seed = int(data_config.seed)
    self.global_batch_size = int(data_config.batch_size)
    self.local_batch_size = self.global_batch_size // process_count
    self.process_index = process_index
    self.max_seq_length = int(data_config.max_seq_length)
    self._pair_options = nsp_pairs.PairOptions(
        max_seq_length=self.max_seq_length,
        short_seq_prob=data_config.short_seq_prob,
        random_next_prob=data_config.random_next_prob)
    self._special_ids = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id)
    self._masking_options = masking.MaskingOptions(
        max_predictions_per_seq=int(data_config.max_predictions_per_seq),
        mask_id=tokenizer.mask_id,
        special_ids=self._special_ids + (tokenizer.mask_id,),
        replacement_ids=masking.replacement_ids_from_vocab(list(tokenizer.vocab)),
        masked_lm_prob=data_config.masked_lm_prob,
        mask_token_prob=data_config.mask_token_prob,
        random_token_prob=data_config.random_token_prob)
    # Background work: one thread builds epochs' rows, one opens the next epoch's
    # tf.data iterator (0.3 s) so that crossing an epoch boundary does not stall.
    self._row_builder = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    self._iterator_opener = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    self._epoch_futures: dict[int, concurrent.futures.Future] = {}
    self._next_epoch_batches: tuple[int, concurrent.futures.Future] | None = None
    self._epoch, self._step = 0, 0
    self._batches: Iterator[dict] | None = None

  # ---------------------------------------------------------------- position
  def state(self) -> dict:
    """The position of the next batch; JSON-able, checkpoint it with the train state."""
    return {"epoch": self._epoch, "step_in_epoch": self._step, **self._fingerprint()}

  def restore(self, state: dict) -> None:
    """Continues from a `state()`; the following batches equal an uninterrupted run's.

    The seed, global batch size and corpus size must be those of the saved run (a state
    without those keys is taken as is).
    """
    for key, mine in self._fingerprint().items():
      if key in state and int(state[key]) != mine:
        raise ValueError(f"data state was saved with {key}={state[key]}, this input has {mine}")
    self._epoch, self._step = int(state["epoch"]), int(state["step_in_epoch"])
    self._batches = None

  def steps_in_epoch(self, epoch: int) -> int:
    return self._epoch_rows(epoch).steps

  def _fingerprint(self) -> dict:
    return {"seed": self.seed, "batch_size": self.global_batch_size,
            "corpus_tokens": self.corpus.num_tokens}

  # ---------------------------------------------------------------- iteration
  def __iter__(self) -> "PretrainingInput":
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    while True:
      if self._batches is None:
        self._batches = self._open_epoch(self._epoch, self._step)
      batch = next(self._batches, None)
      if batch is not None:
        self._step += 1
        if self._step >= self.steps_in_epoch(self._epoch):
          self._next_epoch()
        return batch
      self._next_epoch()  # only when restored to the very end of an epoch

  def _next_epoch(self) -> None:
    self._epoch_futures.pop(self._epoch, None)
    self._epoch, self._step, self._batches = self._epoch + 1, 0, None

  def _open_epoch(self, epoch: int, start_step: int) -> Iterator[dict[str, np.ndarray]]:
    """This epoch's batches (opened in the background if it was foreseen); foresees the next."""
    upcoming, self._next_epoch_batches = self._next_epoch_batches, None
    if upcoming is not None and upcoming[0] == epoch and start_step == 0:
      batches = upcoming[1].result()
    elif start_step > self.steps_in_epoch(epoch):
      raise ValueError(f"position step {start_step} of epoch {epoch} is past its "
                       f"{self.steps_in_epoch(epoch)} steps")
    else:
      batches = self.epoch_batches(epoch, start_step)
    next_rows = self._epoch_rows(epoch + 1, wait=False)
    self._next_epoch_batches = (epoch + 1, self._iterator_opener.submit(
        lambda: self._batches_from_rows(next_rows.result(), 0, epoch + 1)))
    return batches

  def epoch_batches(self, epoch: int, start_step: int = 0,
                    mask_epoch: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """One epoch's local batches from `start_step`; stateless (eval and inspection use it).

    mask_epoch: draw the masks as epoch `mask_epoch` would (default: `epoch`); inspect
    uses it to compare the masks of the same pairs across epochs.
    """
    return self._batches_from_rows(self._epoch_rows(epoch), start_step,
                                   epoch if mask_epoch is None else mask_epoch)

  def _batches_from_rows(self, rows: _EpochRows, start_step: int,
                         mask_epoch: int) -> Iterator[dict[str, np.ndarray]]:
    first = start_step * self.local_batch_size
    columns = (rows.input_ids[first:], rows.a_lengths[first:], rows.b_lengths[first:],
               rows.labels[first:], rows.example_index[first:])
    # Rows are finished _BATCHES_PER_MAP batches at a time (fewer, bigger TF ops), then
    # cut into local batches; a row's content never depends on this grouping.
    dataset = (tf.data.Dataset.from_tensor_slices(columns)
               .batch(self.local_batch_size * _BATCHES_PER_MAP)
               .map(lambda *rows: self._finish_rows(mask_epoch, *rows),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
               .rebatch(self.local_batch_size, drop_remainder=True)
               .prefetch(tf.data.AUTOTUNE))
    return dataset.as_numpy_iterator()

  def _finish_rows(self, epoch, input_ids, a_lengths, b_lengths, labels, example_index):
    # input_ids [R, T]; a_lengths, b_lengths, labels, example_index [R].
    position = tf.range(self.max_seq_length)[None, :]
    attention_mask = position < (a_lengths + b_lengths + 3)[:, None]
    token_type_ids = attention_mask & (position >= (a_lengths + 2)[:, None])
    options = self._masking_options
    noise = masking.example_noise(self.seed, epoch, example_index,
                                  masking.noise_size(self.max_seq_length, options))
    masked = masking.mask_batch(input_ids, noise, options)
    return {
        "input_ids": masked["input_ids"],
        "token_type_ids": tf.cast(token_type_ids, tf.int32),
        "attention_mask": tf.cast(attention_mask, tf.int32),
        "masked_lm_positions": masked["masked_lm_positions"],
        "masked_lm_ids": masked["masked_lm_ids"],
        "masked_lm_weights": masked["masked_lm_weights"],
        "next_sentence_labels": labels,
    }

  # ---------------------------------------------------------------- epoch rows
  def _epoch_rows(self, epoch: int, wait: bool = True):
    """The epoch's rows (wait=True), or the future of them."""
    if epoch not in self._epoch_futures:
      self._epoch_futures[epoch] = self._row_builder.submit(self._build_epoch_rows, epoch)
    return self._epoch_futures[epoch].result() if wait else self._epoch_futures[epoch]

  def _build_epoch_rows(self, epoch: int) -> _EpochRows:
    rng = np.random.default_rng([self.seed, epoch])
    instances = nsp_pairs.build_pair_instances(self.corpus, self._pair_options, rng)
    order = rng.permutation(len(instances))
    steps = len(instances) // self.global_batch_size
    if steps == 0:
      raise corpus_lib.CorpusError(
          f"{len(instances)} pairs from {', '.join(self.corpus.sources[:4])} do not fill one "
          f"batch of {self.global_batch_size}")
    # Global positions of this process's rows, step by step: [steps, local batch].
    local_positions = (np.arange(steps)[:, None] * self.global_batch_size
                       + self.process_index * self.local_batch_size
                       + np.arange(self.local_batch_size)[None, :]).reshape(-1)
    local = instances.take(order[local_positions])
    pad_id, cls_id, sep_id = self._special_ids
    return _EpochRows(
        input_ids=nsp_pairs.pack_pair_instances(
            local, self.corpus.token_ids, self.max_seq_length, cls_id, sep_id, pad_id),
        a_lengths=local.a_lengths.astype(np.int32),
        b_lengths=local.b_lengths.astype(np.int32),
        labels=local.is_random_next.astype(np.int32),
        example_index=local_positions.astype(np.int64),
        steps=steps)


# -------------------------------------------------------------------- construction
def make_tokenizer(data_config):
  """The WordPiece tokenizer of config.data; a missing vocab file is a clear error."""
  vocab_path = paths.resolve(_data_dir(data_config), data_config.vocab_path)
  if not os.path.isfile(vocab_path):
    raise FileNotFoundError(f"vocab file not found: {vocab_path} (config.data.vocab_path)")
  return tokenizer_lib.WordPieceTokenizer(vocab_path, lower_case=data_config.lower_case)


def load_corpora(data_config, tokenizer) -> tuple[corpus_lib.TokenizedCorpus,
                                                  corpus_lib.TokenizedCorpus | None]:
  """(train corpus, eval corpus or None) as config.data describes them."""
  train = _load_corpus(data_config, tokenizer, tuple(data_config.train_files))
  if data_config.eval_files:
    return train, _load_corpus(data_config, tokenizer, tuple(data_config.eval_files))
  held_out = int(data_config.eval_held_out_docs)
  if held_out <= 0:
    return train, None
  if held_out > train.num_documents - 2:
    raise corpus_lib.CorpusError(
        f"eval_held_out_docs={held_out} leaves fewer than 2 of the {train.num_documents} "
        f"documents of {', '.join(train.sources[:4])} for training")
  order = np.random.default_rng([data_config.seed, _HELD_OUT_STREAM]).permutation(
      train.num_documents)
  return (train.select_documents(np.sort(order[held_out:])),
          train.select_documents(np.sort(order[:held_out])))


def make_inputs(data_config, *, process_index: int = 0, process_count: int = 1,
                tokenizer=None) -> tuple[PretrainingInput, PretrainingInput | None]:
  """(train input, eval input or None) for config.data; the usual entry point."""
  tokenizer = make_tokenizer(data_config) if tokenizer is None else tokenizer
  train, held_out = load_corpora(data_config, tokenizer)
  def build(corpus):
    return PretrainingInput(corpus, tokenizer, data_config,
                            process_index=process_index, process_count=process_count)
  return build(train), (build(held_out) if held_out is not None else None)


def _data_dir(data_config) -> str | None:
  return data_config.data_dir or paths.default_data_dir()


def _load_corpus(data_config, tokenizer, file_patterns) -> corpus_lib.TokenizedCorpus:
  data_dir = _data_dir(data_config)
  if file_patterns:
    files = corpus_lib.expand_file_patterns(file_patterns, data_dir)
    identity = [[f, os.path.getsize(f), os.path.getmtime(f)] for f in files]
    def read():
      return corpus_lib.read_files(files, tokenizer)
  elif data_config.tfds_name:
    identity = [data_config.tfds_name, data_config.tfds_split, data_config.tfds_text_field,
                data_config.tfds_data_dir]
    def read():
      return corpus_lib.read_tfds(
          data_config.tfds_name, data_config.tfds_split, data_config.tfds_text_field,
          tokenizer, data_config.tfds_data_dir or None)
  else:
    raise corpus_lib.CorpusError("config.data names no text: set train_files or tfds_name")
  if not data_config.cache_dir:
    return read()
  vocab_path = paths.resolve(data_dir, data_config.vocab_path)
  with open(vocab_path, "rb") as f:
    vocab_digest = hashlib.sha256(f.read()).hexdigest()
  key = json.dumps([_CACHE_FORMAT_VERSION, identity, vocab_digest, data_config.lower_case])
  cache_path = os.path.join(data_config.cache_dir,
                            f"corpus-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz")
  if os.path.isfile(cache_path):
    return corpus_lib.TokenizedCorpus.load(cache_path)
  corpus = read()
  os.makedirs(data_config.cache_dir, exist_ok=True)
  corpus.save(cache_path)
  return corpus
