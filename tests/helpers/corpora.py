"""Synthetic tokenized corpora whose token i has id i."""
import numpy as np

from bert_jax.text.corpus import TokenizedCorpus


def synthetic_corpus(sentences_per_document, seed=0, min_len=3, max_len=30) -> TokenizedCorpus:
  """Token i of the corpus has id i, so spans are easy to check."""
  rng = np.random.default_rng(seed)
  lengths = [rng.integers(min_len, max_len + 1, size=n) for n in sentences_per_document]
  sentence_lengths = np.concatenate(lengths)
  sentence_starts = np.concatenate([[0], np.cumsum(sentence_lengths)])
  document_starts = np.concatenate([[0], np.cumsum(sentences_per_document)])
  return TokenizedCorpus(np.arange(sentence_starts[-1], dtype=np.int32), sentence_starts,
                         document_starts, sources=("synthetic",))


def document_of_token(corpus, token):
  """The index of the document that holds token id `token`."""
  sentence = np.searchsorted(corpus.sentence_starts, token, side="right") - 1
  return np.searchsorted(corpus.document_starts, sentence, side="right") - 1
