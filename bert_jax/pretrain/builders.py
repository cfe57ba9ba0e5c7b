"""Example builders, by name: how one epoch of a shard's documents becomes model rows.

`config.data.example_builder` picks one from BUILDERS. A builder draws an epoch's
instances from a numpy Generator (new ones every epoch), and lays a chosen subset of them
out as unmasked rows; masking happens afterwards, in the stream, for every builder alike.
A new builder (full sentences, single segments) is one `ExampleBuilder` in BUILDERS; the
stream and the trainer do not change.

  nsp_pairs  BERT's: [CLS] A [SEP] B [SEP], B the true continuation or (random_next_prob)
             from another document; next_sentence_labels 1 = NotNext
  sop        ALBERT's: A and B consecutive, swapped with p = 1/2;
             sentence_order_labels 1 = swapped
  sop_equal_lengths  sop with both segments cut to the shorter one's length at their
             shared boundary: the order must be read from content, not from which
             segment is longer (README, SOP's length cue)
  full_sentences  RoBERTa's FULL-SENTENCES: [CLS] whole sentences [SEP], packed across
             documents ([SEP] between them); no labels, one segment
  doc_sentences   RoBERTa's DOC-SENTENCES: the same within one document
  token_stream    the corpus cut every T - 2 tokens, mid-sentence where it falls ([SEP]
             between documents): fairseq's break_mode="none", MosaicBERT's concatenated
             text; every row full (sentence_blocks.py); no labels, one segment

config.data.packing: rows hold several examples, each with its own [CLS] ... [SEP],
positions from 0 and attention within it (segment_ids and positions ride along into the
batch). Sentence blocks: sentence_blocks.py says which blocks share a row. Pairs
(PackedPairs): the epoch's pairs best fit into rows in decreasing length (bert_jax/core/
packed_rows.py, the layout fine-tuning packs with), at most config.data.pairs_per_row = K per
row; each pair keeps [CLS] A [SEP] B [SEP] and its token types 0/1, and the row carries
cls_positions, the label and example_mask per slot [K] (0 for empty slots), so the
sentence head reads each pair's [CLS] and NSP/SOP are the mean over real pairs, as
unpacked. What it buys: google-research/bert makes short_seq_prob = 10% of pairs short on
purpose, and document ends make more; packed, they share rows. Fill on the prepared corpus
(python -m bert_jax.pretrain.inspect --config=configs/tiny.py [--config.data.
max_seq_length=512 --config.data.max_predictions_per_seq=76], its fill_* lines; K=4):
  T=128  nsp_pairs 0.955 -> 0.990, sop 0.956 -> 0.992 (1.04 pairs per row; at most 3
         pairs share a row, and K=2 gives the same fill to 4 digits)
  T=512  nsp_pairs 0.853 -> 0.993, sop 0.876 -> 0.998
"""
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from bert_jax.core import packed_rows
from bert_jax.pretrain import nsp_pairs
from bert_jax.pretrain import sentence_blocks
from bert_jax.text import corpus as corpus_lib
from bert_jax.text.corpus import TokenizedCorpus


@dataclasses.dataclass(frozen=True)
class Rows:
  """n rows of length T, before masking."""
  input_ids: np.ndarray       # int32 [n, T], [PAD] after `lengths`
  token_type_ids: np.ndarray  # int8 [n, T]
  lengths: np.ndarray         # int32 [n] real tokens per row
  # {batch field: int32 [n]}, one per label_fields; packed pairs: int32 [n, K] per slot,
  # and "example_mask" float32 [n, K] (1.0 a real pair, 0.0 an empty slot).
  labels: dict[str, np.ndarray]
  # Packed rows (config.data.packing): {"segment_ids", "positions": int [n, T]} (and for
  # pairs "cls_positions": int32 [n, K]), the model's packing= arrays; {} when each row is
  # one example.
  packing: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class SpecialIds:
  pad: int
  cls: int
  sep: int


@dataclasses.dataclass(frozen=True)
class ExampleBuilder:
  """options(data_config) -> the builder's options (validated);
  check_corpus(corpus) raises corpus.CorpusError when the corpus cannot feed it;
  instances(corpus, options, rng) -> one epoch's instances (len() and take(indices));
  rows(instances, corpus, options, special_ids) -> Rows.
  label_fields: the per-row label fields its Rows carry into every batch."""
  options: Callable[[Any], Any]
  check_corpus: Callable[[TokenizedCorpus], None]
  instances: Callable[..., Any]
  rows: Callable[..., Rows]
  label_fields: tuple[str, ...] = ()


# ------------------------------------------------------------------------- NSP pairs
def _pair_options(data_config) -> nsp_pairs.PairOptions:
  slots = 0
  if data_config.get("packing"):
    slots = int(data_config.get("pairs_per_row", 0))
    if slots < 1:
      raise ValueError(f"config.data.pairs_per_row={slots}: packed pair rows need the most "
                       "pairs a row holds (>= 1)")
  return nsp_pairs.PairOptions(max_seq_length=int(data_config.max_seq_length),
                               short_seq_prob=data_config.short_seq_prob,
                               random_next_prob=data_config.random_next_prob, slots=slots)


@dataclasses.dataclass(frozen=True)
class PackedPairs:
  """An epoch's pairs several to a row (config.data.packing): best fit in decreasing length
  (bert_jax/core/packed_rows.py's assign_rows), at most options.slots per row. len() and take()
  count rows (the builder's instances), as SentenceBlocks does."""
  pairs: nsp_pairs.PairInstances  # I pairs, row by row, in slot order
  rows: np.ndarray                # int64 [I] each pair's row, ascending

  @classmethod
  def assign(cls, pairs: nsp_pairs.PairInstances,
             options: nsp_pairs.PairOptions) -> "PackedPairs":
    lengths = pairs.a_lengths + pairs.b_lengths + 3  # [CLS] A [SEP] B [SEP]
    rows = packed_rows.assign_rows(lengths, options.max_seq_length, options.slots)
    return cls(pairs.take(np.concatenate([np.asarray(r, np.int64) for r in rows] or
                                         [np.zeros(0, np.int64)])),
               np.repeat(np.arange(len(rows), dtype=np.int64), [len(r) for r in rows]))

  def __len__(self) -> int:
    return int(self.rows[-1]) + 1 if len(self.rows) else 0

  def take(self, indices: np.ndarray) -> "PackedPairs":
    chosen, rows = packed_rows.take_rows(self.rows, indices)
    return PackedPairs(self.pairs.take(chosen), rows)


def _pair_instances(build: Callable[..., nsp_pairs.PairInstances]) -> Callable[..., Any]:
  """build(corpus, options, rng) -> pairs; packed into rows when options.slots."""
  def instances(corpus, options: nsp_pairs.PairOptions, rng):
    pairs = build(corpus, options, rng)
    return PackedPairs.assign(pairs, options) if options.slots else pairs
  return instances


def _pair_rows(instances, corpus: TokenizedCorpus, options: nsp_pairs.PairOptions,
               special: SpecialIds, label_field: str = "next_sentence_labels") -> Rows:
  """[CLS] A [SEP] B [SEP] rows; segment 1 is B [SEP]; label 1 = is_random_next (NotNext,
  or for SOP: swapped). Packed (PackedPairs): each pair one example of its row, the label
  and example_mask per slot [n, K], cls_positions among the model's packing= arrays."""
  pairs = instances.pairs if options.slots else instances
  t = options.max_seq_length
  input_ids = nsp_pairs.pack_pair_instances(pairs, corpus.token_ids, t, special.cls,
                                            special.sep, special.pad)
  a_lengths = pairs.a_lengths.astype(np.int32)
  lengths = a_lengths + pairs.b_lengths.astype(np.int32) + 3
  position = np.arange(t)[None, :]
  token_type_ids = ((position >= (a_lengths + 2)[:, None])
                    & (position < lengths[:, None])).astype(np.int8)
  labels = pairs.is_random_next.astype(np.int32)
  if not options.slots:
    return Rows(input_ids, token_type_ids, lengths, {label_field: labels})
  splits = np.searchsorted(instances.rows, np.arange(1, len(instances)))
  packed = packed_rows.lay_out(
      {"input_ids": input_ids, "token_type_ids": token_type_ids, label_field: labels,
       "attention_mask": (position < lengths[:, None]).astype(np.int8)},
      np.split(np.arange(len(pairs)), splits), options.slots, special.pad)
  return Rows(packed["input_ids"], packed["token_type_ids"],
              packed["attention_mask"].sum(-1, dtype=np.int32),
              {label_field: packed[label_field], "example_mask": packed["example_mask"]},
              {k: packed[k] for k in packed_rows.PACKING_KEYS})


# ------------------------------------------------------------ sentence order (ALBERT)
def _sop_instances(corpus: TokenizedCorpus, options: nsp_pairs.PairOptions,
                   rng: np.random.Generator) -> nsp_pairs.PairInstances:
  """ALBERT's sentence-order pairs: A and B are consecutive segments of one document
  (NSP pairs without random next), swapped with probability 1/2; label 1 = swapped.

  As in google-research/albert's create_pretraining_data.py, a chunk of a single sentence
  (a one-sentence document) still takes B from another document, and counts as label 1.
  """
  pairs = nsp_pairs.build_pair_instances(
      corpus, dataclasses.replace(options, random_next_prob=0.0), rng)
  return _swapped_half(pairs, rng)


def _sop_equal_length_instances(corpus: TokenizedCorpus, options: nsp_pairs.PairOptions,
                                rng: np.random.Generator) -> nsp_pairs.PairInstances:
  """_sop_instances with A and B of one length: before the swap, the longer segment is cut
  to the shorter's length away from their shared boundary (A keeps its last tokens, B its
  first), so a pair in either order has two segments of n = min(len A, len B) tokens.

  In original order B is longer more often than A (a chunk's A is drawn first and the
  truncation trims the longer side), a cue the head can read without the text's order.
  """
  pairs = nsp_pairs.build_pair_instances(
      corpus, dataclasses.replace(options, random_next_prob=0.0), rng)
  n = np.minimum(pairs.a_lengths, pairs.b_lengths)
  return _swapped_half(nsp_pairs.PairInstances(
      a_starts=pairs.a_starts + pairs.a_lengths - n, a_lengths=n,
      b_starts=pairs.b_starts, b_lengths=n, is_random_next=pairs.is_random_next), rng)


def _swapped_half(pairs: nsp_pairs.PairInstances,
                  rng: np.random.Generator) -> nsp_pairs.PairInstances:
  """A and B exchanged with probability 1/2; is_random_next (label 1) = swapped, or B
  from another document (forced, as in ALBERT's data)."""
  swap = rng.random(len(pairs)) < 0.5
  return nsp_pairs.PairInstances(
      a_starts=np.where(swap, pairs.b_starts, pairs.a_starts),
      a_lengths=np.where(swap, pairs.b_lengths, pairs.a_lengths),
      b_starts=np.where(swap, pairs.a_starts, pairs.b_starts),
      b_lengths=np.where(swap, pairs.a_lengths, pairs.b_lengths),
      is_random_next=swap | pairs.is_random_next)


def _sentence_order(build: Callable[..., nsp_pairs.PairInstances]) -> "ExampleBuilder":
  """An SOP builder: pairs from build(corpus, options, rng), labelled sentence_order_labels."""
  return ExampleBuilder(
      options=_pair_options,
      check_corpus=lambda corpus: corpus.check_usable_for_nsp(),
      instances=_pair_instances(build),
      rows=functools.partial(_pair_rows, label_field="sentence_order_labels"),
      label_fields=("sentence_order_labels",))


# ------------------------------------------------ sentence blocks (RoBERTa, one segment)
def _check_not_empty(corpus: TokenizedCorpus) -> None:
  if corpus.num_sentences == 0:
    raise corpus_lib.CorpusError(f"empty corpus: no sentence in {', '.join(corpus.sources[:4])}")


@dataclasses.dataclass(frozen=True)
class BlockOptions:
  max_seq_length: int
  packing: bool  # several blocks per row (sentence_blocks.py's fill_gaps)


def _block_rows(blocks, corpus, options: BlockOptions, special: SpecialIds) -> Rows:
  rows = sentence_blocks.block_rows(blocks, corpus, options.max_seq_length, special.cls,
                                    special.sep, special.pad)
  arrays = ({k: rows[k] for k in ("segment_ids", "positions")} if options.packing else {})
  return Rows(rows["input_ids"], np.zeros(rows["input_ids"].shape, np.int8), rows["lengths"],
              {}, arrays)


def _sentence_blocks(cross_documents: bool) -> "ExampleBuilder":
  return ExampleBuilder(
      options=lambda data_config: BlockOptions(int(data_config.max_seq_length),
                                               bool(data_config.get("packing", False))),
      check_corpus=_check_not_empty,
      instances=lambda corpus, options, rng: sentence_blocks.pack_sentence_blocks(
          corpus, options.max_seq_length - 2, cross_documents, fill_gaps=options.packing),
      rows=_block_rows)


def _token_stream_options(data_config) -> BlockOptions:
  if data_config.get("packing"):
    raise ValueError("config.data.packing with example_builder='token_stream': its rows are "
                     "already full; packing adds nothing")
  return BlockOptions(int(data_config.max_seq_length), False)


BUILDERS = {
    "nsp_pairs": ExampleBuilder(
        options=_pair_options,
        check_corpus=lambda corpus: corpus.check_usable_for_nsp(),
        instances=_pair_instances(nsp_pairs.build_pair_instances),
        rows=_pair_rows,
        label_fields=("next_sentence_labels",)),
    "sop": _sentence_order(_sop_instances),
    "sop_equal_lengths": _sentence_order(_sop_equal_length_instances),
    "full_sentences": _sentence_blocks(cross_documents=True),
    "doc_sentences": _sentence_blocks(cross_documents=False),
    "token_stream": ExampleBuilder(
        options=_token_stream_options,
        check_corpus=_check_not_empty,
        instances=lambda corpus, options, rng: sentence_blocks.pack_token_stream(
            corpus, options.max_seq_length - 2),
        rows=_block_rows),
}


def get(name: str) -> ExampleBuilder:
  if name not in BUILDERS:
    raise ValueError(f"config.data.example_builder={name!r}: expected one of {sorted(BUILDERS)}")
  return BUILDERS[name]
