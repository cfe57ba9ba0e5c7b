"""Sentence-pair (NSP) instances for one epoch, drawn afresh from a numpy Generator.

`build_pair_instances(corpus, options, rng)` follows google-research/bert's
create_instances_from_document: walk each document, fill a chunk with whole sentences up to
a target length (max_seq_length - 3, or with probability short_seq_prob a length drawn
uniformly from [2, max_seq_length - 3]), split the chunk at a random sentence boundary into
A and B. With probability random_next_prob B is replaced by sentences from a random other
document, starting at a random sentence and long enough for the target (NotNext), and the
chunk's unused sentences are put back. The pair is then truncated from the longer side,
each removed token from the front or the back with probability 1/2.

Called with a new Generator per (seed, epoch), it gives new pairs every epoch, instead of
create_pretraining_data.py's `dupe_factor` static copies. Two deliberate differences:
  * the target length is drawn per chunk, not once per document (with book-length
    documents a per-document draw makes whole epochs short-or-long);
  * a chunk closes only once it holds two sentences, and never leaves a document's last
    sentence alone (it joins the chunk; after a NotNext a single unused sentence is not
    put back). In the original a one-sentence chunk forces NotNext, which pulled IsNext
    1-2 points below 1 - random_next_prob here; now only one-sentence documents do.
The truncation is done in closed form, vectorized over the epoch; it removes the same
number of tokens from each side as the token-by-token loop, front/back split binomially.

Instances are token spans into `corpus.token_ids` (I instances):
  a_starts, a_lengths, b_starts, b_lengths  int64 [I]
  is_random_next                            bool  [I]   (True = NotNext, label 1)
`pack_pair_instances` lays them out as [CLS] A [SEP] B [SEP] [PAD]... rows.
"""
import dataclasses

import numpy as np

from bert_jax.text.corpus import TokenizedCorpus

_SPECIAL_TOKENS_PER_PAIR = 3  # [CLS] A [SEP] B [SEP]


@dataclasses.dataclass(frozen=True)
class PairOptions:
  max_seq_length: int = 128
  short_seq_prob: float = 0.1
  random_next_prob: float = 0.5
  # Packed rows (config.data.packing; builders.py lays them out): the most pairs a row
  # holds, its K slots; 0 = one pair per row.
  slots: int = 0

  def __post_init__(self):
    if self.max_seq_length < _SPECIAL_TOKENS_PER_PAIR + 2:
      raise ValueError(f"max_seq_length must be >= 5, got {self.max_seq_length}")
    for name in ("short_seq_prob", "random_next_prob"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")


@dataclasses.dataclass(frozen=True)
class PairInstances:
  """Sentence pairs as spans of corpus.token_ids (I instances)."""
  a_starts: np.ndarray        # int64 [I]
  a_lengths: np.ndarray       # int64 [I]
  b_starts: np.ndarray        # int64 [I]
  b_lengths: np.ndarray       # int64 [I]
  is_random_next: np.ndarray  # bool [I]

  def __len__(self) -> int:
    return len(self.a_starts)

  def take(self, indices: np.ndarray) -> "PairInstances":
    return PairInstances(*(field[indices] for field in dataclasses.astuple(self)))


def build_pair_instances(corpus: TokenizedCorpus, options: PairOptions,
                         rng: np.random.Generator) -> PairInstances:
  """One epoch's instances, in document order (shuffle them afterwards)."""
  max_tokens = options.max_seq_length - _SPECIAL_TOKENS_PER_PAIR
  token_starts = corpus.sentence_starts.tolist()  # python ints: this loop is scalar code
  document_starts = corpus.document_starts.tolist()
  num_documents = corpus.num_documents
  spans = []  # (a_start, a_length, b_start, b_length, is_random_next), untruncated

  def draw_target() -> int:
    if rng.random() < options.short_seq_prob:
      return int(rng.integers(2, max_tokens + 1))
    return max_tokens

  for document in range(num_documents):
    first, last = document_starts[document], document_starts[document + 1]
    chunk_first, sentence, target = first, first, draw_target()
    while sentence < last:
      sentence += 1  # the chunk is sentences [chunk_first, sentence)
      chunk_size = sentence - chunk_first
      chunk_tokens = token_starts[sentence] - token_starts[chunk_first]
      remaining = last - sentence
      if remaining and (chunk_tokens < target or chunk_size < 2 or remaining == 1):
        continue  # keep filling; never leave a lone last sentence behind
      a_end = chunk_first + int(rng.integers(1, chunk_size)) if chunk_size >= 2 else sentence
      a_start, a_length = token_starts[chunk_first], token_starts[a_end] - token_starts[chunk_first]
      if chunk_size == 1 or rng.random() < options.random_next_prob:
        b_start, b_length = _random_continuation(
            document, max(1, target - a_length), num_documents, document_starts,
            token_starts, rng)
        spans.append((a_start, a_length, b_start, b_length, True))
        # Put the chunk's unused sentences back, unless only one is left: alone it could
        # only make a forced-NotNext pair, which would push IsNext below its rate.
        sentence = a_end if last - a_end >= 2 else sentence
      else:
        b_start, b_length = token_starts[a_end], token_starts[sentence] - token_starts[a_end]
        spans.append((a_start, a_length, b_start, b_length, False))
      chunk_first, target = sentence, draw_target()

  columns = np.array(spans, dtype=np.int64).reshape(-1, 5)
  a_starts, a_lengths, b_starts, b_lengths = _truncate_pairs(
      columns[:, 0], columns[:, 1], columns[:, 2], columns[:, 3], max_tokens, rng)
  return PairInstances(a_starts, a_lengths, b_starts, b_lengths, columns[:, 4].astype(bool))


def _random_continuation(document, target_tokens, num_documents, document_starts,
                         token_starts, rng) -> tuple[int, int]:
  """Whole sentences of another document from a random start, >= target_tokens if it can."""
  other = int(rng.integers(num_documents - 1))
  other += other >= document  # uniform over the documents other than `document`
  first, last = document_starts[other], document_starts[other + 1]
  start = first + int(rng.integers(last - first))
  end = start + 1
  while end < last and token_starts[end] - token_starts[start] < target_tokens:
    end += 1
  return token_starts[start], token_starts[end] - token_starts[start]


def _truncate_pairs(a_starts, a_lengths, b_starts, b_lengths, max_tokens, rng):
  """Trims pairs to max_tokens: the longer side first, ties trim B, front or back at random.

  Token by token this removes from the longer side until the sides are equal, then
  alternates B, A, B, ...; the counts below are that loop's, in closed form.
  """
  excess = np.maximum(a_lengths + b_lengths - max_tokens, 0)
  to_equal = np.minimum(excess, np.abs(a_lengths - b_lengths))
  alternating = excess - to_equal
  a_cut = np.where(a_lengths > b_lengths, to_equal, 0) + alternating // 2
  b_cut = np.where(a_lengths > b_lengths, 0, to_equal) + (alternating + 1) // 2
  a_front = rng.binomial(a_cut, 0.5)
  b_front = rng.binomial(b_cut, 0.5)
  return a_starts + a_front, a_lengths - a_cut, b_starts + b_front, b_lengths - b_cut


def pack_pair_instances(instances: PairInstances, token_ids: np.ndarray, max_seq_length: int,
                        cls_id: int, sep_id: int, pad_id: int) -> np.ndarray:
  """Instances -> input_ids int32 [I, T]: [CLS] A [SEP] B [SEP] then [PAD]s."""
  position = np.arange(max_seq_length)[None, :]       # [1, T]
  a_length = instances.a_lengths[:, None]             # [I, 1]
  b_length = instances.b_lengths[:, None]
  in_a = (position >= 1) & (position < 1 + a_length)  # [I, T]
  b_first = 2 + a_length
  in_b = (position >= b_first) & (position < b_first + b_length)
  source = np.where(in_a, instances.a_starts[:, None] + position - 1,
                    instances.b_starts[:, None] + position - b_first)
  source = np.where(in_a | in_b, source, 0)
  input_ids = np.where(in_a | in_b, token_ids[source], pad_id).astype(np.int32)
  input_ids[:, 0] = cls_id
  rows = np.arange(len(instances))
  input_ids[rows, 1 + instances.a_lengths] = sep_id
  input_ids[rows, b_first[:, 0] + instances.b_lengths] = sep_id
  return input_ids
