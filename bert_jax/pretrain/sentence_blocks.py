"""RoBERTa's FULL-SENTENCES and DOC-SENTENCES rows: whole sentences packed up to the length;
and the token stream: the corpus cut every max_seq_length - 2 tokens, sentences or not.

`pack_sentence_blocks(corpus, max_tokens, cross_documents)` walks the corpus in order and
fills each block with whole, contiguous sentences while they fit in `max_tokens`
(max_seq_length - 2: [CLS] ... [SEP]). FULL-SENTENCES (cross_documents=True) goes on into
the next document, with one extra [SEP] between the two documents, as RoBERTa adds an extra
separator (Liu et al. 2019, sec. 4.2); DOC-SENTENCES closes the block at a document's end.
A sentence longer than a whole block is cut into block-sized pieces, so no token is lost
(fairseq's break_mode="complete" instead makes such a sentence one block longer than the
block size).

Each block is one row, RoBERTa's layout. The rows then waste about half a sentence each
(FULL-SENTENCES fill 0.85 at T=128 on the prepared wikitext corpus, 0.96 at T=512).
`fill_gaps=True` packs that waste: when a block closes, the next block starts in the row
whose free room fits the sentence most tightly ([CLS] sentence [SEP]), else in a new row,
and grows there while the next sentences fit. A row then holds several blocks, each its
own example: [CLS] block [SEP] [CLS] block [SEP] ..., with segment ids and restarting
positions so that attention stays within each block (the model's `packing=` path, as in
fine-tuning). Every block is still whole contiguous sentences, and every token is in one
block; what changes is that some blocks are short (the ones filling gaps), so the mean
example is shorter. On the prepared corpus (python -m bert_jax.pretrain.inspect, its
fill_* lines; WordPiece, 235,561 sentences of 27.5 tokens):
  T=128  FULL-SENTENCES fill 0.851 -> 0.983; 1.74 blocks per row; mean block 109 -> 72
         tokens (median 114 -> 91). DOC-SENTENCES 0.838 -> 0.984.
  T=512  FULL-SENTENCES fill 0.957 -> 0.996; 1.81 blocks per row; mean block 490 -> 281
         (median 497 -> 464). DOC-SENTENCES 0.875 -> 0.996.
Without it, > 0.95 at T=128 is out of reach for whole sentences: the block ends where the
next sentence does not fit, on average half a sentence early.

`pack_token_stream(corpus, max_tokens)` is fairseq's break_mode="none" and MosaicBERT's
concatenated text: the documents in order, one [SEP] between two documents, cut into blocks
of exactly `max_tokens` positions whatever the sentence boundaries, so every row is full
(but where a document's [SEP] would fall on a block's first or last position: that row is
one token short) and the last. Rows then start and end mid-sentence.

Blocks are spans of `corpus.token_ids` (B blocks, R rows), sorted by row:
  starts, lengths  int64 [B]  the corpus tokens of the block, in order
  separators       int64 [B]  document boundaries inside the block (each adds one [SEP])
  rows             int64 [B]  the row the block is laid out in (0 .. R-1, ascending)
len() and take() count rows (a builder's instances). The blocks are the same every epoch,
as RoBERTa's; the stream reorders the rows per epoch and the masks are redrawn (dynamic
masking).
"""
import dataclasses

import numpy as np

from bert_jax.core import packed_rows
from bert_jax.text.corpus import TokenizedCorpus

_SPECIAL = 2  # [CLS] and [SEP] around every block
_MIN_GAP = _SPECIAL + 1  # a row takes another block only with room for a token of it


@dataclasses.dataclass(frozen=True)
class SentenceBlocks:
  starts: np.ndarray      # int64 [B]
  lengths: np.ndarray     # int64 [B]
  separators: np.ndarray  # int64 [B]
  rows: np.ndarray        # int64 [B], ascending

  def __len__(self) -> int:
    return int(self.rows[-1]) + 1 if len(self.rows) else 0

  def take(self, indices: np.ndarray) -> "SentenceBlocks":
    """The blocks of rows `indices`, those rows renumbered 0 .. len(indices) - 1."""
    chosen, rows = packed_rows.take_rows(self.rows, indices)
    return SentenceBlocks(self.starts[chosen], self.lengths[chosen], self.separators[chosen],
                          rows)


def pack_sentence_blocks(corpus: TokenizedCorpus, max_tokens: int, cross_documents: bool,
                         fill_gaps: bool = False) -> SentenceBlocks:
  """The module docstring's blocks, in corpus order (rows in the order they open)."""
  if max_tokens < 2:
    raise ValueError(f"max_seq_length must be >= 4 for sentence blocks, got {max_tokens + 2}")
  row_length = max_tokens + _SPECIAL
  sentence_starts = corpus.sentence_starts.tolist()  # python ints: scalar loop
  first_sentences = set(corpus.document_starts[:-1].tolist())
  blocks = []  # (start, length, separators, row)
  free = []  # per row: positions not taken yet
  gaps: dict[int, list[int]] = {}  # fill_gaps: free positions -> rows that take a block
  block = None  # the open block: [start, used (tokens + separators), separators, row]

  def close():
    nonlocal block
    if block is not None:
      start, used, separators, row = block
      blocks.append((start, used - separators, separators, row))
      free[row] -= used + _SPECIAL
      if fill_gaps and free[row] >= _MIN_GAP:
        gaps.setdefault(free[row], []).append(row)
    block = None

  def new_row(used: int = 0) -> int:
    free.append(row_length - used)
    return len(free) - 1

  def open_block(start: int, tokens: int):
    nonlocal block
    space = (next((s for s in range(tokens + _SPECIAL, row_length + 1) if gaps.get(s)), None)
             if fill_gaps else None)
    block = [start, 0, 0, new_row() if space is None else gaps[space].pop()]

  for sentence in range(corpus.num_sentences):
    first, last = sentence_starts[sentence], sentence_starts[sentence + 1]
    new_document = sentence in first_sentences
    if new_document and block is not None and not cross_documents:
      close()
    boundary = int(new_document and block is not None)
    if block is not None and block[1] + boundary + (last - first) > free[block[3]] - _SPECIAL:
      close()
      boundary = 0
    while last - first > max_tokens:  # longer than a block: its own block-sized pieces
      close()
      blocks.append((first, max_tokens, 0, new_row(row_length)))
      first += max_tokens
    if block is None:
      open_block(first, last - first)
    block[1] += boundary + (last - first)
    block[2] += boundary
  close()
  columns = np.array(blocks, dtype=np.int64).reshape(-1, 4)
  columns = columns[np.argsort(columns[:, 3], kind="stable")]
  return SentenceBlocks(*columns.T.copy())


def pack_token_stream(corpus: TokenizedCorpus, max_tokens: int) -> SentenceBlocks:
  """The module docstring's token-stream blocks, one per row, in corpus order."""
  if max_tokens < 2:
    raise ValueError(f"max_seq_length must be >= 4 for token-stream rows, got {max_tokens + 2}")
  document = _document_of_token(corpus)
  # Token i's place in the documents joined with one separator between two documents.
  block = (np.arange(corpus.num_tokens) + document) // max_tokens
  starts = np.flatnonzero(np.diff(block, prepend=-1))  # every block holds a token: >= 2 places
  lengths = np.diff(np.append(starts, corpus.num_tokens))
  new_document = np.diff(document, prepend=-1) != 0
  new_document[starts] = False  # a block's first token: its separator is not in the block
  separators = np.add.reduceat(new_document.astype(np.int64), starts) if len(starts) else starts
  return SentenceBlocks(starts.astype(np.int64), lengths.astype(np.int64),
                        separators.astype(np.int64), np.arange(len(starts), dtype=np.int64))


def _document_of_token(corpus: TokenizedCorpus) -> np.ndarray:
  """int64 [corpus tokens]: each token's document index."""
  return np.searchsorted(corpus.sentence_starts[corpus.document_starts[1:-1]],
                         np.arange(corpus.num_tokens), side="right")


def block_rows(blocks: SentenceBlocks, corpus: TokenizedCorpus, max_seq_length: int,
               cls_id: int, sep_id: int, pad_id: int) -> dict[str, np.ndarray]:
  """The rows (R = len(blocks)), each block as [CLS] block [SEP] with a [SEP] at each
  document boundary inside it, a row's blocks side by side, then padding:
    input_ids    int32 [R, T]
    lengths      int32 [R]     real tokens (all before the padding)
    segment_ids  int16 [R, T]  1, 2, ... per block in the row, 0 on padding
    positions    int16 [R, T]  0, 1, ... restarting at each block's [CLS]"""
  document_of_token = _document_of_token(corpus)
  r = len(blocks)
  input_ids = np.full((r, max_seq_length), pad_id, np.int32)
  segment_ids = np.zeros((r, max_seq_length), np.int16)
  positions = np.zeros((r, max_seq_length), np.int16)
  lengths = np.zeros(r, np.int32)
  slot = np.zeros(r, np.int16)
  for start, length, row in zip(blocks.starts.tolist(), blocks.lengths.tolist(),
                                blocks.rows.tolist()):
    tokens = corpus.token_ids[start:start + length]
    documents = document_of_token[start:start + length]
    boundaries = np.flatnonzero(np.diff(documents)) + 1  # first token of each new document
    example = np.concatenate([[cls_id], np.insert(tokens, boundaries, sep_id), [sep_id]])
    span = slice(lengths[row], lengths[row] + len(example))
    input_ids[row, span] = example
    slot[row] += 1
    segment_ids[row, span] = slot[row]
    positions[row, span] = np.arange(len(example))
    lengths[row] += len(example)
  return {"input_ids": input_ids, "lengths": lengths, "segment_ids": segment_ids,
          "positions": positions}
