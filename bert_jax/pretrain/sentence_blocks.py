"""RoBERTa's FULL-SENTENCES and DOC-SENTENCES rows: whole sentences packed up to the length.

`pack_sentence_blocks(corpus, max_tokens, cross_documents)` walks the corpus in order and
fills each block with whole, contiguous sentences while they fit in `max_tokens`
(max_seq_length - 2: [CLS] ... [SEP]). FULL-SENTENCES (cross_documents=True) goes on into
the next document, with one extra [SEP] between the two documents, as RoBERTa adds an extra
separator (Liu et al. 2019, sec. 4.2); DOC-SENTENCES closes the block at a document's end.
A sentence longer than a whole block is cut into block-sized pieces, so no token is lost.

Blocks are spans of `corpus.token_ids` (B blocks):
  starts, lengths  int64 [B]  the corpus tokens of the block, in order
  separators       int64 [B]  document boundaries inside the block (each adds one [SEP])
The blocks are the same every epoch, as RoBERTa's; the stream reorders them per epoch and
the masks are redrawn (dynamic masking).
"""
import dataclasses

import numpy as np

from bert_jax.text.corpus import TokenizedCorpus


@dataclasses.dataclass(frozen=True)
class SentenceBlocks:
  starts: np.ndarray      # int64 [B]
  lengths: np.ndarray     # int64 [B]
  separators: np.ndarray  # int64 [B]

  def __len__(self) -> int:
    return len(self.starts)

  def take(self, indices: np.ndarray) -> "SentenceBlocks":
    return SentenceBlocks(*(field[indices] for field in dataclasses.astuple(self)))


def pack_sentence_blocks(corpus: TokenizedCorpus, max_tokens: int,
                         cross_documents: bool) -> SentenceBlocks:
  """The module docstring's blocks, in corpus order."""
  if max_tokens < 2:
    raise ValueError(f"max_seq_length must be >= 4 for sentence blocks, got {max_tokens + 2}")
  sentence_starts = corpus.sentence_starts.tolist()  # python ints: scalar loop
  first_sentences = set(corpus.document_starts[:-1].tolist())
  blocks = []  # (start, length, separators)
  start, used, separators = None, 0, 0

  def close():
    nonlocal start, used, separators
    if start is not None:
      blocks.append((start, used - separators, separators))
    start, used, separators = None, 0, 0

  for sentence in range(corpus.num_sentences):
    first, last = sentence_starts[sentence], sentence_starts[sentence + 1]
    new_document = sentence in first_sentences
    if new_document and start is not None and not cross_documents:
      close()
    boundary = int(new_document and start is not None)
    if start is not None and used + boundary + (last - first) > max_tokens:
      close()
      boundary = 0
    while last - first > max_tokens:  # longer than a block: its own block-sized pieces
      close()
      blocks.append((first, max_tokens, 0))
      first += max_tokens
    if start is None:
      start = first
    used += boundary + (last - first)
    separators += boundary
  close()
  columns = np.array(blocks, dtype=np.int64).reshape(-1, 3)
  return SentenceBlocks(columns[:, 0], columns[:, 1], columns[:, 2])


def block_rows(blocks: SentenceBlocks, corpus: TokenizedCorpus, max_seq_length: int,
               cls_id: int, sep_id: int, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
  """(input_ids int32 [B, T]: [CLS] block [SEP] [PAD]..., with [SEP] at each document
  boundary inside the block; lengths int32 [B] of real tokens)."""
  document_of_token = np.searchsorted(
      corpus.sentence_starts[corpus.document_starts[1:-1]], np.arange(corpus.num_tokens),
      side="right")  # [corpus tokens] -> document index
  rows = np.full((len(blocks), max_seq_length), pad_id, np.int32)
  lengths = (blocks.lengths + blocks.separators + 2).astype(np.int32)
  for row, (start, length) in enumerate(zip(blocks.starts.tolist(), blocks.lengths.tolist())):
    tokens = corpus.token_ids[start:start + length]
    documents = document_of_token[start:start + length]
    boundaries = np.flatnonzero(np.diff(documents)) + 1  # first token of each new document
    body = np.insert(tokens, boundaries, sep_id)
    rows[row, 0] = cls_id
    rows[row, 1:1 + len(body)] = body
    rows[row, 1 + len(body)] = sep_id
  return rows, lengths
