"""RoBERTa's FULL-SENTENCES / DOC-SENTENCES blocks: whole sentences, every token once."""
import numpy as np
import pytest

from bert_jax.pretrain import sentence_blocks
from tests.helpers.corpora import document_of_token, synthetic_corpus

CLS, SEP, PAD = -2, -1, -3  # the synthetic corpus's token i has id i >= 0


@pytest.fixture(scope="module")
def corpus():
  return synthetic_corpus(np.random.default_rng(3).integers(1, 30, size=80), max_len=40)


@pytest.mark.parametrize("cross", [True, False])
@pytest.mark.parametrize("seq", [32, 128])
def test_blocks_hold_every_token_once_in_order(corpus, cross, seq):
  blocks = sentence_blocks.pack_sentence_blocks(corpus, seq - 2, cross)
  laid_out = sentence_blocks.block_rows(blocks, corpus, seq, CLS, SEP, PAD)
  rows, lengths = laid_out["input_ids"], laid_out["lengths"]
  assert (lengths <= seq).all() and (rows[:, 0] == CLS).all()
  body = [row[1:n - 1] for row, n in zip(rows, lengths)]
  assert all(row[n - 1] == SEP and (row[n:] == PAD).all() for row, n in zip(rows, lengths))
  # Without the separators, the blocks concatenate to the corpus.
  tokens = np.concatenate([b[b != SEP] for b in body])
  np.testing.assert_array_equal(tokens, corpus.token_ids)
  for block, start, length in zip(body, blocks.starts, blocks.lengths):
    documents = document_of_token(corpus, np.arange(start, start + length))
    assert (np.diff(documents) >= 0).all()
    assert (block == SEP).sum() == len(np.unique(documents)) - 1
    if not cross:
      assert len(np.unique(documents)) == 1


def test_blocks_start_and_end_at_sentence_boundaries(corpus):
  blocks = sentence_blocks.pack_sentence_blocks(corpus, 126, cross_documents=True)
  starts = set(corpus.sentence_starts.tolist())
  short = blocks.lengths < 126  # a block cut from an over-long sentence may end inside it
  assert all(s in starts for s in blocks.starts[short].tolist())
  assert all(s in starts for s in (blocks.starts + blocks.lengths)[short].tolist())


def test_full_sentences_fill_more_than_doc_sentences(corpus):
  fill = {}
  for cross in (True, False):
    blocks = sentence_blocks.pack_sentence_blocks(corpus, 126, cross)
    lengths = sentence_blocks.block_rows(blocks, corpus, 128, CLS, SEP, PAD)["lengths"]
    fill[cross] = lengths.sum() / (128 * len(lengths))
  assert fill[True] > fill[False]


@pytest.mark.parametrize("seq", [8, 32, 128])
def test_token_stream_rows_are_full_and_hold_every_token_once_in_order(corpus, seq):
  blocks = sentence_blocks.pack_token_stream(corpus, seq - 2)
  laid_out = sentence_blocks.block_rows(blocks, corpus, seq, CLS, SEP, PAD)
  rows, lengths = laid_out["input_ids"], laid_out["lengths"]
  body = [row[1:n - 1] for row, n in zip(rows, lengths)]
  assert (rows[:, 0] == CLS).all() and all(row[n - 1] == SEP for row, n in zip(rows, lengths))
  # Without the separators, the rows concatenate to the corpus: no token lost or repeated.
  np.testing.assert_array_equal(np.concatenate([b[b != SEP] for b in body]), corpus.token_ids)
  # Reference: the documents joined with one [SEP] between two, cut every seq - 2
  # positions; a [SEP] that lands on a block's edge is not written.
  documents = [corpus.token_ids[corpus.sentence_starts[corpus.document_starts[d]]:
                                corpus.sentence_starts[corpus.document_starts[d + 1]]]
               for d in range(corpus.num_documents)]
  stream = np.concatenate([np.append(d, SEP) for d in documents])[:-1]
  chunks = [stream[i:i + seq - 2] for i in range(0, len(stream), seq - 2)]
  chunks = [c[1:] if c[0] == SEP else c for c in chunks]
  chunks = [c[:-1] if c[-1] == SEP else c for c in chunks]
  assert len(chunks) == len(body)
  for chunk, row in zip(chunks, body):
    np.testing.assert_array_equal(row, chunk)
  assert (lengths[:-1] >= seq - 2).all()  # full, but for a [SEP] at each edge
  fill = lengths.sum() / lengths.size / seq
  assert fill > 0.97 if seq < 128 else fill > 0.9


def test_token_stream_rows_cross_sentence_boundaries(corpus):
  """Unlike FULL-SENTENCES, blocks start where the previous one is full."""
  stream = sentence_blocks.pack_token_stream(corpus, 30)
  full = sentence_blocks.pack_sentence_blocks(corpus, 30, cross_documents=True)
  assert len(stream) < len(full)
  starts = set(corpus.sentence_starts.tolist())
  assert sum(s not in starts for s in stream.starts.tolist()) > len(stream) // 2
