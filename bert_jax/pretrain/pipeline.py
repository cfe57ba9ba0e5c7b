"""The pretraining input: corpus -> examples per epoch -> dynamic masking -> batches.

Use (the trainer):

  train_input, eval_input = pipeline.make_inputs(
      config.data, tokenizer, process_index=jax.process_index(),
      process_count=jax.process_count())
  train_input.restore(saved["data"])        # optional; resumes exactly where it was
  batch = next(train_input)                  # one local batch, the contract below
  saved["data"] = train_input.state()        # JSON, save it with the train state (merged
                                             # over processes: run/checkpoints.py)
  for batch in eval_input.epoch_batches(0):  # eval_input is None without held-out data
    ...                                      # the same fixed batches on every call

Batch contract (numpy; B = batch_size // process_count local rows, T = max_seq_length,
P = max_predictions_per_seq):
  input_ids            int32   [B, T]  the builder's rows (nsp_pairs: [CLS] A [SEP] B [SEP]
                                       [PAD]...), masks applied
  token_type_ids       int32   [B, T]  segment ids (nsp_pairs: 0 for [CLS] A [SEP], 1 for
                                       B [SEP], 0 for padding)
  attention_mask       int32   [B, T]  1 real token, 0 padding
  masked_lm_positions  int32   [B, P]  ascending; 0 in unused slots
  masked_lm_ids        int32   [B, P]  original ids; 0 in unused slots
  masked_lm_weights    float32 [B, P]  1.0 real prediction, 0.0 unused slot
  + the builder's label fields, int32 [B] each (nsp_pairs: next_sentence_labels,
    0 IsNext (B is the true continuation), 1 NotNext)
  + with config.data.packing (several examples per row):
    segment_ids, positions int32 [B, T] (1, 2, ... per example, 0 on padding; 0, 1, ...
    restarting per example), the model's packing= arrays; the pair builders (nsp_pairs,
    sop) add cls_positions int32 [B, K] (each pair's [CLS]; K = pairs_per_row) and
    example_mask float32 [B, K] (1.0 a real pair, 0.0 an empty slot), and their label
    field is then int32 [B, K], one per slot (0 in empty slots)
  + with span_fields=True (make_inputs; the span boundary objective asks for them):
    masked_lm_span_left, masked_lm_span_right, masked_lm_span_offset, masked_lm_unit_start
                       int32 [B, P] (masking.py's module docstring), and with
                       config.data.spans also span_tags int32 [B, T] (text/spans.py; 0 on
                       special tokens and padding)

Data shards, position, determinism, resumption. The corpus's documents fall into K =
config.data.num_shards shards (document id % K; 0 = one shard per process), and a process
tokenizes only the documents of its shards (plus the held-out ones): K/P whole shards each
when K >= P, else P/K processes share one shard and each takes a slice of its rows. Each
shard is its own stream: epoch e of shard k is a pure function of (seed, e, k) -- the
example builder's instances (builders.py) drawn with numpy Generator(seed, e, k) over the
shard's documents (nsp_pairs' NotNext partners come from the same shard), then a full
permutation (no shuffle buffer).
Global step s takes the next G/K rows of every shard, shard-major (G = batch_size), so
process p's rows are global rows [p*B, (p+1)*B); the remainder of a shard's epoch is
dropped and each shard crosses epochs on its own. Masking noise comes from (seed, epoch,
example index) with the index distinct over shards (masking.py). A fixed K gives the same
global batches for any process count that K allows. The position is (epoch, step) per
shard: `state()` returns this process's shards' positions with "seed", "batch_size",
"num_shards" and each shard's token count to check against (the trainer merges every
process's "shards" into the checkpoint), `restore(state)` moves there, and the batches that
follow are exactly those an uninterrupted run would have seen. A shard's next epoch is
built in a background thread while the current one is consumed.

Fields read from config.data (`default_data_config()` gives them with defaults):
  data_dir             data root for relative paths; "" -> the default (text/paths.py)
  train_files          globs of plain-format files (prepare.py); or, when empty:
  tfds_name            a tfds dataset whose examples are documents, with
  tfds_split           the split of tfds_name that is read ("train")
  tfds_text_field      the feature of each tfds example that holds its document's text
  tfds_data_dir        where tfds keeps prepared datasets ("" -> tfds's default)
  eval_files           globs of held-out plain-format files, or
  eval_held_out_docs   this many training documents (a fixed random choice) held out
  vocab_path, lower_case                  the tokenizer (text/tokenizers.py)
  tokenizer            "" (the family's kinds: models/families.py Family.tokenizers) or
                       one kind of text/tokenizers.py's KINDS that vocab_path is read as
  max_seq_length       T: tokens per row, [CLS] and [SEP]s included
  max_predictions_per_seq  P: masked positions a row carries; a row masks
                       min(P, max(1, round(masked_lm_prob x its eligible tokens)))
  example_builder      a name in builders.BUILDERS ("nsp_pairs")
  packing              False; True: rows hold several examples (sentence-block builders:
                       sentence_blocks.py's fill_gaps; pair builders: builders.py's
                       PackedPairs, up to pairs_per_row pairs in a row)
  pairs_per_row        K, the slots of a packed pair row (4)
  masking              a name in selectors.SELECTORS: "token", "whole_word" (pieces go with
                       their word), "ngram" (ALBERT), "span" (SpanBERT), "phrase",
                       "entity" (ERNIE's knowledge masking: annotated units whole; needs
                       spans), "mixture" (per example, one of masking_mixture's)
  masking_mixture      with masking="mixture": "name:weight,..." of SELECTORS, each
                       example masked by one drawn with those weights (ERNIE's stages:
                       "token:1,phrase:1,entity:1")
  spans                read the span annotations beside every plain file (text/spans.py):
                       batches then carry span_tags int8 -> int32 [B, T] with span_fields
  masked_lm_prob       the share of a row's eligible tokens selected for prediction (0.15)
  mask_token_prob      the share of the selected tokens replaced by [MASK] (0.8)
  random_token_prob    the share of the selected tokens replaced by a random token (0.1;
                       the rest, 1 - mask_token_prob - random_token_prob, stay as they are)
  dupe_factor          0: dynamic masking (new examples and masks every epoch); N > 0:
                       static, as create_pretraining_data.py's dupe_factor: epoch e
                       repeats epoch e mod N (its pairs, order and masks)
  short_seq_prob, random_next_prob        NSP pair sampling (nsp_pairs.py)
  seed                 the stream's seed: shuffling, pairs, masks (per epoch)
  batch_size           global (all processes)
  num_shards           K above; 0 = the process count
  cache_dir            "" -> no cache; else tokenized corpora are kept there as .npz
  shards               "" -> the tf.data stream; else a pattern of pre-tokenized shard
                       files (bert_jax/pretrain/shards.py writes them from that stream),
                       read and masked in numpy instead (no TensorFlow)
  eval_shards          with shards: the held-out rows' shard file(s); "" -> no eval
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import ml_collections
import numpy as np

from bert_jax.files import storage
from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.pretrain import builders
from bert_jax.pretrain import masking
from bert_jax.pretrain import stream
from bert_jax.text import corpus as corpus_lib
from bert_jax.text import spans as spans_lib
from bert_jax.text import tokenizers

_CACHE_FORMAT_VERSION = 4  # bump when corpus.py changes what it produces
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
      "tokenizer": "",
      "max_seq_length": 128,
      "max_predictions_per_seq": 20,
      "example_builder": "nsp_pairs",
      "packing": False,
      "pairs_per_row": 4,
      "masking": "token",
      "masking_mixture": "",
      "spans": False,
      "dupe_factor": 0,
      "masked_lm_prob": 0.15,
      "mask_token_prob": 0.8,
      "random_token_prob": 0.1,
      "short_seq_prob": 0.1,
      "random_next_prob": 0.5,
      "seed": 0,
      "batch_size": 32,
      "cache_dir": "",
      "num_shards": 0,
      "shards": "",
      "eval_shards": "",
  })


def resolve_num_shards(data_config, process_count: int) -> int:
  """config.data.num_shards (0 = one per process), checked against processes and batch."""
  num_shards = int(data_config.num_shards) or process_count
  batch_size = int(data_config.batch_size)
  if num_shards % process_count and process_count % num_shards:
    raise ValueError(f"config.data.num_shards={num_shards} and {process_count} processes: "
                     "one must divide the other")
  if batch_size % num_shards or batch_size % process_count:
    raise ValueError(f"batch_size {batch_size} is not divisible by num_shards {num_shards} "
                     f"and process_count {process_count}")
  return num_shards


def shard_assignment(num_shards: int, process_index: int,
                     process_count: int) -> tuple[tuple[int, ...], int, int]:
  """(shards this process reads, its slice index within each, slices per shard).

  With at least as many shards as processes a process reads num_shards / process_count
  whole shards; with fewer, process_count / num_shards processes read one shard and each
  takes its slice of that shard's rows.
  """
  if not 0 <= process_index < process_count:
    raise ValueError(f"process_index {process_index} not in [0, {process_count})")
  if num_shards >= process_count:
    per_process = num_shards // process_count
    return tuple(range(process_index * per_process, (process_index + 1) * per_process)), 0, 1
  readers = process_count // num_shards
  return (process_index // readers,), process_index % readers, readers


class PretrainingInput:
  """An endless, resumable iterator of local pretraining batches (module docstring)."""

  def __init__(self, corpora: dict[int, corpus_lib.TokenizedCorpus], tokenizer, data_config,
               *, process_index: int = 0, process_count: int = 1,
               num_shards: int | None = None, span_fields: bool = False):
    """corpora: {shard: corpus} for exactly the shards `shard_assignment` gives this process.

    num_shards: overrides config.data.num_shards (the held-out input is one shard).
    span_fields: batches also carry the span fields (module docstring).
    """
    if data_config.dupe_factor < 0:
      raise ValueError(f"config.data.dupe_factor={data_config.dupe_factor}: must be >= 0 "
                       "(0 = dynamic masking)")
    if data_config.seed < 0:
      raise ValueError(f"seed must be >= 0, got {data_config.seed}")
    if num_shards is None:
      num_shards = resolve_num_shards(data_config, process_count)
    elif data_config.batch_size % num_shards or data_config.batch_size % process_count:
      raise ValueError(f"batch_size {data_config.batch_size} is not divisible by "
                       f"num_shards {num_shards} and process_count {process_count}")
    shards, slice_index, slice_count = shard_assignment(num_shards, process_index,
                                                        process_count)
    if sorted(corpora) != list(shards):
      raise ValueError(f"process {process_index} of {process_count} reads data shards "
                       f"{list(shards)} of {num_shards}; got corpora for {sorted(corpora)}")
    builder = builders.get(data_config.example_builder)
    for shard in shards:
      try:
        builder.check_corpus(corpora[shard])
      except corpus_lib.CorpusError as error:
        if num_shards == 1:
          raise
        raise corpus_lib.CorpusError(f"data shard {shard} of {num_shards}: {error} (fewer "
                                     "shards, config.data.num_shards, may help)") from error
    self.corpora = corpora
    self.num_shards = num_shards
    self.seed = int(data_config.seed)
    self.global_batch_size = int(data_config.batch_size)
    self.local_batch_size = self.global_batch_size // process_count
    special_ids = builders.SpecialIds(pad=tokenizer.pad_id, cls=tokenizer.cls_id,
                                      sep=tokenizer.sep_id)
    self._streams = [
        stream.ShardStream(corpora[shard], shard, num_shards,
                           self.global_batch_size // num_shards, slice_index, slice_count,
                           self.seed, builder, builder.options(data_config),
                           masking_options(data_config, tokenizer, span_fields), special_ids,
                           int(data_config.max_seq_length), int(data_config.dupe_factor))
        for shard in shards]

  # ---------------------------------------------------------------- position
  def state(self) -> dict:
    """This process's position: JSON; checkpoint it (merged over processes) with the train state.

    {"seed", "batch_size", "num_shards", "shards": {"k": {"epoch", "step_in_epoch",
    "tokens"}}} for this process's shards; the trainer merges every process's "shards".
    """
    return {"seed": self.seed, "batch_size": self.global_batch_size,
            "num_shards": self.num_shards,
            "shards": {str(s.shard): {"epoch": s.epoch, "step_in_epoch": s.step,
                                      "tokens": s.corpus.num_tokens} for s in self._streams}}

  def restore(self, state: dict) -> None:
    """Continues from a (merged) `state()`; the following batches equal an uninterrupted run's.

    Seed, global batch size, shard count and each shard's corpus size must be the saved run's.
    """
    for key, mine in (("seed", self.seed), ("batch_size", self.global_batch_size),
                      ("num_shards", self.num_shards)):
      if int(state[key]) != mine:
        raise ValueError(f"data state was saved with {key}={state[key]}, this input has {mine}"
                         + (" (set config.data.num_shards)" if key == "num_shards" else ""))
    for shard_stream in self._streams:
      saved = state["shards"].get(str(shard_stream.shard))
      if saved is None:
        raise ValueError(f"data state holds no position for shard {shard_stream.shard}")
      if int(saved["tokens"]) != shard_stream.corpus.num_tokens:
        raise ValueError(f"data shard {shard_stream.shard} was saved with {saved['tokens']} "
                         f"tokens, this input has {shard_stream.corpus.num_tokens}: not the "
                         "same corpus")
      shard_stream.move_to(int(saved["epoch"]), int(saved["step_in_epoch"]))

  def steps_in_epoch(self, epoch: int) -> int:
    """Batches in epoch_batches(epoch): the fewest of this process's shards."""
    return min(stream.steps_in_epoch(epoch) for stream in self._streams)

  def unmasked_rows(self, epoch: int) -> dict[int, builders.Rows]:
    """{shard: its epoch `epoch`'s rows for this process, in step order, before masking}
    (what bert_jax/pretrain/shards.py writes)."""
    return {stream.shard: stream.epoch_rows(epoch).rows for stream in self._streams}

  # ---------------------------------------------------------------- iteration
  def __iter__(self) -> "PretrainingInput":
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    return _concatenate_blocks([next(stream) for stream in self._streams])

  def epoch_batches(self, epoch: int, start_step: int = 0,
                    mask_epoch: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Every shard's epoch `epoch` side by side, from `start_step`; stateless (eval and
    inspection use it). With several shards it ends with the shortest one.

    mask_epoch: draw the masks as epoch `mask_epoch` would (default: `epoch`); inspect
    uses it to compare the masks of the same pairs across epochs.
    """
    per_shard = [stream.epoch_batches(epoch, start_step, mask_epoch) for stream in self._streams]
    return (_concatenate_blocks(blocks) for blocks in zip(*per_shard))


def _concatenate_blocks(blocks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
  if len(blocks) == 1:
    return blocks[0]
  return {key: np.concatenate([block[key] for block in blocks]) for key in blocks[0]}


# -------------------------------------------------------------------- construction
def builder_for(data_config) -> builders.ExampleBuilder:
  return builders.get(data_config.example_builder)


def check_builder_makes(data_config, fields: set[str]) -> None:
  """The example builder must make every label field the objectives read."""
  made = {"masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
          *masking.SPAN_FIELDS, *builder_for(data_config).label_fields}
  missing = sorted(fields - made)
  if missing:
    raise ValueError(f"config.objectives reads {missing}, which config.data.example_builder="
                     f"{data_config.example_builder!r} does not make")


def masking_options(data_config, tokenizer, span_fields: bool = False
                    ) -> masking.MaskingOptions:
  """config.data's masking choices with the tokenizer's ids and words (validated)."""
  vocab = list(tokenizer.vocab)
  return masking.MaskingOptions(
      max_predictions_per_seq=int(data_config.max_predictions_per_seq),
      mask_id=tokenizer.mask_id,
      special_ids=(tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id),
      replacement_ids=masking.replacement_ids_from_vocab(vocab),
      masked_lm_prob=data_config.masked_lm_prob,
      mask_token_prob=data_config.mask_token_prob,
      random_token_prob=data_config.random_token_prob,
      selector=data_config.masking,
      continuation_table=masking.continuation_table_for(tokenizer),
      span_fields=span_fields,
      mixture=masking.parse_mixture(data_config.get("masking_mixture", "")),
      span_tags=bool(data_config.get("spans", False)))


def load_corpora(data_config, tokenizer, shards: tuple[int, ...] = (0,), num_shards: int = 1
                 ) -> tuple[dict[int, corpus_lib.TokenizedCorpus],
                            corpus_lib.TokenizedCorpus | None]:
  """({shard: train corpus} for `shards`, eval corpus or None) as config.data describes them.

  Documents go to shard `id % num_shards` (ids: corpus.py); only the requested shards'
  documents and the held-out ones are tokenized. Held-out documents (eval_held_out_docs)
  are a fixed random choice, by seed, of all the source's document ids.
  """
  source, identity = _line_source(data_config, "train_files")
  held_out_ids = np.zeros([0], np.int64)
  held_out = int(data_config.eval_held_out_docs)
  if not data_config.eval_files and held_out > 0:
    count = _cached(data_config, tokenizer, ["count", identity], "json",
                    lambda: corpus_lib.count_documents(source))
    if held_out > count - 2:
      raise corpus_lib.CorpusError(
          f"eval_held_out_docs={held_out} leaves fewer than 2 of the {count} "
          f"documents of {', '.join(source.sources[:4])} for training")
    order = np.random.default_rng([data_config.seed, _HELD_OUT_STREAM]).permutation(count)
    held_out_ids = np.sort(order[:held_out])
  wanted_shards = np.asarray(sorted(shards), np.int64)

  def keep(ids):  # tf int64 [L] -> bool [L]
    in_shard = tf.reduce_any((ids % num_shards)[:, None] == wanted_shards[None, :], -1)
    return in_shard | _is_member(ids, held_out_ids) if held_out_ids.size else in_shard

  read_all = num_shards == 1 and not held_out_ids.size
  key = ["corpus", identity, num_shards, wanted_shards.tolist(), held_out_ids.tolist()]
  corpus = _cached(data_config, tokenizer, key, "npz", lambda: corpus_lib.tokenize_lines(
      source, tokenizer, None if read_all else keep))
  def is_held_out(ids):
    return np.isin(ids, held_out_ids)
  if read_all:
    train = {0: corpus}
  else:
    train = {shard: corpus.select_document_ids(
                 lambda ids, k=shard: (ids % num_shards == k) & ~is_held_out(ids))
             for shard in shards}
  if data_config.eval_files:
    eval_source, eval_identity = _line_source(data_config, "eval_files")
    return train, _cached(data_config, tokenizer, ["corpus", eval_identity], "npz",
                          lambda: corpus_lib.tokenize_lines(eval_source, tokenizer))
  if not held_out_ids.size:
    return train, None
  return train, corpus.select_document_ids(is_held_out)


def make_inputs(data_config, tokenizer, *, process_index: int = 0, process_count: int = 1,
                span_fields: bool = False
                ) -> tuple[PretrainingInput, PretrainingInput | None]:
  """(train input, eval input or None) for config.data; the usual entry point.

  This process tokenizes only its data shards (and the held-out documents). span_fields:
  batches also carry the span fields (module docstring).
  """
  masking_options(data_config, tokenizer)  # a config error shows before tokenizing
  builder_for(data_config).options(data_config)
  num_shards = resolve_num_shards(data_config, process_count)
  shards, _, _ = shard_assignment(num_shards, process_index, process_count)
  train, held_out = load_corpora(data_config, tokenizer, shards, num_shards)
  train_input = PretrainingInput(train, tokenizer, data_config, process_index=process_index,
                                 process_count=process_count, num_shards=num_shards,
                                 span_fields=span_fields)
  if held_out is None:
    return train_input, None
  return train_input, PretrainingInput({0: held_out}, tokenizer, data_config, num_shards=1,
                                       process_index=process_index, process_count=process_count,
                                       span_fields=span_fields)


def _line_source(data_config, field: str) -> tuple[corpus_lib.LineSource, list]:
  """(the LineSource of config.data.<field>, else tfds; what identifies it for the cache)."""
  file_patterns = tuple(data_config[field])
  with_spans = bool(data_config.get("spans", False))
  if file_patterns:
    files = corpus_lib.expand_file_patterns(file_patterns, data_config.data_dir,
                                            f"config.data.{field}")
    source = corpus_lib.file_lines(files, with_spans)
    described = files + ([spans_lib.span_path(f) for f in files] if with_spans else [])
    identity = [[f, *storage.version(f)] for f in described]
    return source, identity
  if with_spans:
    raise corpus_lib.CorpusError("config.data.spans=True reads the span files beside "
                                 "plain-format files (config.data.train_files), not tfds")
  if data_config.tfds_name:
    identity = [data_config.tfds_name, data_config.tfds_split, data_config.tfds_text_field,
                data_config.tfds_data_dir]
    return corpus_lib.tfds_lines(data_config.tfds_name, data_config.tfds_split,
                                 data_config.tfds_text_field,
                                 data_config.tfds_data_dir or None), identity
  raise corpus_lib.CorpusError("config.data names no text: set train_files or tfds_name")


def _is_member(ids: tf.Tensor, sorted_values: np.ndarray) -> tf.Tensor:
  """ids int64 [L] -> bool [L]: which are in the non-empty sorted int64 array."""
  values = tf.constant(sorted_values, tf.int64)
  where = tf.minimum(tf.searchsorted(values, ids), len(sorted_values) - 1)
  return tf.equal(tf.gather(values, where), ids)


def _cached(data_config, tokenizer, key: list, kind: str, build):
  """build(), kept in config.data.cache_dir (when set) under a digest of `key`, the
  tokenizer's vocab and the lowercasing; kind "npz" holds a TokenizedCorpus, "json" a
  number."""
  if not data_config.cache_dir:
    return build()
  vocab_digest = tokenizers.vocab_fingerprint(data_config, tokenizer)
  full_key = json.dumps([_CACHE_FORMAT_VERSION, key, vocab_digest, data_config.lower_case])
  digest = hashlib.sha256(full_key.encode()).hexdigest()[:16]
  path = storage.join(data_config.cache_dir, f"{key[0]}-{digest}.{kind}")
  if storage.exists(path):
    if kind == "npz":
      return corpus_lib.TokenizedCorpus.load(path)
    return json.loads(storage.read_text(path))
  value = build()
  storage.makedirs(data_config.cache_dir)
  if kind == "npz":
    value.save(path)
  else:
    storage.write_text(path, json.dumps(value))
  return value
