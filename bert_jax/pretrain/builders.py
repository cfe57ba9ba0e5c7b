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
  full_sentences  RoBERTa's FULL-SENTENCES: [CLS] whole sentences [SEP], packed across
             documents ([SEP] between them); no labels, one segment
  doc_sentences   RoBERTa's DOC-SENTENCES: the same within one document

config.data.packing (sentence blocks only): rows hold several blocks, each its own
example (segment_ids and positions ride along into the batch; sentence_blocks.py says
which blocks share a row). The pair builders refuse it.
"""
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

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
  labels: dict[str, np.ndarray]  # {batch field: int32 [n]}, one per label_fields
  # Packed rows (config.data.packing): {"segment_ids", "positions": int16 [n, T]}, the
  # model's packing= arrays; {} when each row is one example.
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
  if data_config.get("packing"):
    raise ValueError(f"config.data.packing=True: example_builder="
                     f"{data_config.example_builder!r} rows do not pack (sentence blocks do)")
  return nsp_pairs.PairOptions(max_seq_length=int(data_config.max_seq_length),
                               short_seq_prob=data_config.short_seq_prob,
                               random_next_prob=data_config.random_next_prob)


def _pair_rows(instances: nsp_pairs.PairInstances, corpus: TokenizedCorpus,
               options: nsp_pairs.PairOptions, special: SpecialIds,
               label_field: str = "next_sentence_labels") -> Rows:
  """[CLS] A [SEP] B [SEP] rows; segment 1 is B [SEP]; label 1 = is_random_next (NotNext,
  or for SOP: swapped)."""
  t = options.max_seq_length
  input_ids = nsp_pairs.pack_pair_instances(instances, corpus.token_ids, t, special.cls,
                                            special.sep, special.pad)
  a_lengths = instances.a_lengths.astype(np.int32)
  lengths = a_lengths + instances.b_lengths.astype(np.int32) + 3
  position = np.arange(t)[None, :]
  token_type_ids = ((position >= (a_lengths + 2)[:, None])
                    & (position < lengths[:, None])).astype(np.int8)
  return Rows(input_ids, token_type_ids, lengths,
              {label_field: instances.is_random_next.astype(np.int32)})


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
  swap = rng.random(len(pairs)) < 0.5
  return nsp_pairs.PairInstances(
      a_starts=np.where(swap, pairs.b_starts, pairs.a_starts),
      a_lengths=np.where(swap, pairs.b_lengths, pairs.a_lengths),
      b_starts=np.where(swap, pairs.a_starts, pairs.b_starts),
      b_lengths=np.where(swap, pairs.a_lengths, pairs.b_lengths),
      is_random_next=swap | pairs.is_random_next)


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
  packing = ({k: rows[k] for k in ("segment_ids", "positions")} if options.packing else {})
  return Rows(rows["input_ids"], np.zeros(rows["input_ids"].shape, np.int8), rows["lengths"],
              {}, packing)


def _sentence_blocks(cross_documents: bool) -> "ExampleBuilder":
  return ExampleBuilder(
      options=lambda data_config: BlockOptions(int(data_config.max_seq_length),
                                               bool(data_config.get("packing", False))),
      check_corpus=_check_not_empty,
      instances=lambda corpus, options, rng: sentence_blocks.pack_sentence_blocks(
          corpus, options.max_seq_length - 2, cross_documents, fill_gaps=options.packing),
      rows=_block_rows)


BUILDERS = {
    "nsp_pairs": ExampleBuilder(
        options=_pair_options,
        check_corpus=lambda corpus: corpus.check_usable_for_nsp(),
        instances=nsp_pairs.build_pair_instances,
        rows=_pair_rows,
        label_fields=("next_sentence_labels",)),
    "sop": ExampleBuilder(
        options=_pair_options,
        check_corpus=lambda corpus: corpus.check_usable_for_nsp(),
        instances=_sop_instances,
        rows=functools.partial(_pair_rows, label_field="sentence_order_labels"),
        label_fields=("sentence_order_labels",)),
    "full_sentences": _sentence_blocks(cross_documents=True),
    "doc_sentences": _sentence_blocks(cross_documents=False),
}


def get(name: str) -> ExampleBuilder:
  if name not in BUILDERS:
    raise ValueError(f"config.data.example_builder={name!r}: expected one of {sorted(BUILDERS)}")
  return BUILDERS[name]
