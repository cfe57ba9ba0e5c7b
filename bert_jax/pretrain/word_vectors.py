r"""Count-based word vectors from the pretraining corpus, to start a word-embedding table.

  python -m bert_jax.pretrain.word_vectors --config=configs/modernbert.py \
      --output=runs/corpus/bpe-8k-vectors.npz
  python -m bert_jax.train --config=configs/modernbert.py \
      --config.init_word_vectors=runs/corpus/bpe-8k-vectors.npz --workdir=runs/modernbert

Reads config.data as the trainer does (the same tokenizer, vocabulary, files and cache;
held-out documents left out) and counts, within each training document, how often piece j
appears within --window positions of piece i (both directions, every offset weighted 1;
a document's sentences are one stream, documents are not crossed). The vectors are the
rank-`dim` truncated SVD of the positive PMI matrix with the context counts raised to 0.75
(Levy, Goldberg & Dagan 2015, "Improving distributional similarity with lessons learned
from word embeddings": PPMI, context distribution smoothing, U sqrt(S)), and `dim` is the
model's word-embedding width (config.model.embedding_size, else hidden_size).

Shapes: V = vocab_size, d = dim.
Writes an .npz: vectors float32 [V, d]; counts int64 [V] (each piece's occurrences in the
counted documents; a piece that never occurs has a zero vector); window, and the corpus,
vocabulary and token count it came from. `config.init_word_vectors` starts a fresh run's
word-embedding table(s) from it (`bert_jax.run.init_chain.init_word_vectors`: the rows of
pieces that occur, rescaled to the fresh table's standard deviation; the other rows keep
their fresh values).

Measured on the prepared corpus (7.2 M byte-level BPE tokens, 8k pieces, window 5, d 128):
the counting and the SVD take 17-37 s on 2 cores, and a logistic probe on the mean of a
sentence's vectors (experiments/payoff_diagnosis.py's, 4,000 SST-2 sentences, dev) reads
72.4% with them against 58.4% with random vectors (experiments/PAYOFF.md,
"Corpus word vectors").
"""
import io
import time

import numpy as np
import scipy.sparse
from absl import app
from absl import flags
from sklearn.utils.extmath import randomized_svd

from bert_jax.files import storage
from bert_jax.startup import cli
from bert_jax.startup import config_flag
from bert_jax.pretrain import pipeline
from bert_jax.text import corpus as corpus_lib
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import make_tokenizer

_CONFIG = config_flag.define_config("config", "A pretraining config.")
_OUTPUT = flags.DEFINE_string("output", None, "The .npz to write.")
_WINDOW = flags.DEFINE_integer("window", 5, "Context positions counted on each side.")
_DIM = flags.DEFINE_integer("dim", 0, "Vector size; 0 = the config's word-embedding width.")

SMOOTHING = 0.75  # context counts ** 0.75 (Levy et al. 2015)


def cooccurrence(corpus: corpus_lib.TokenizedCorpus, vocab_size: int, window: int
                 ) -> scipy.sparse.csr_matrix:
  """[V, V] counts of piece j within `window` positions of piece i in one document."""
  if window < 1:
    raise ValueError(f"--window={window}: must be at least 1")
  ids = corpus.token_ids.astype(np.int64)
  if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
    raise ValueError(f"token ids outside [0, {vocab_size}): the corpus and the vocabulary "
                     "disagree")
  token_starts = corpus.sentence_starts[corpus.document_starts]  # [D + 1] token offsets
  document = np.searchsorted(token_starts, np.arange(ids.size), side="right") - 1
  counts = scipy.sparse.csr_matrix((vocab_size, vocab_size), dtype=np.float64)
  for offset in range(1, window + 1):
    same = document[:-offset] == document[offset:]
    left, right = ids[:-offset][same], ids[offset:][same]
    pairs = scipy.sparse.coo_matrix((np.ones(left.size), (left, right)),
                                    shape=(vocab_size, vocab_size)).tocsr()
    counts = counts + pairs + pairs.T
  return counts


def ppmi(counts: scipy.sparse.csr_matrix) -> scipy.sparse.csr_matrix:
  """max(0, log p(i, j) / (p(i) p_0.75(j))) on the nonzero counts (zeros stay 0)."""
  counts = counts.tocoo()
  rows = np.asarray(counts.sum(axis=1)).ravel()
  contexts = np.asarray(counts.sum(axis=0)).ravel() ** SMOOTHING
  pmi = np.log(counts.data * contexts.sum() / (rows[counts.row] * contexts[counts.col]))
  keep = pmi > 0
  return scipy.sparse.csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])),
                                 shape=counts.shape)


def word_vectors(corpus: corpus_lib.TokenizedCorpus, vocab_size: int, dim: int,
                 window: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """(vectors float32 [V, d] = U sqrt(S) of the PPMI matrix's rank-d SVD, counts [V])."""
  if dim < 1 or dim >= vocab_size:
    raise ValueError(f"dim={dim}: must be in [1, vocab_size={vocab_size})")
  matrix = ppmi(cooccurrence(corpus, vocab_size, window))
  if matrix.nnz == 0:
    raise corpus_lib.CorpusError(f"no two tokens within {window} of each other in one "
                                 f"document of {', '.join(corpus.sources[:4])}")
  u, s, _ = randomized_svd(matrix, dim, n_iter=5, random_state=seed)
  counts = np.bincount(corpus.token_ids, minlength=vocab_size).astype(np.int64)
  return (u * np.sqrt(s)).astype(np.float32), counts


def main(argv):
  del argv
  if _CONFIG.value is None or not _OUTPUT.value:
    raise app.UsageError("--config and --output are required")
  config = _CONFIG.value
  width = config.model.get("embedding_size") or config.model.hidden_size
  dim = _DIM.value or width
  start = time.time()
  tokenizer = make_tokenizer(config.data, model_dir=config.get("init_from", ""),
                             kinds=tokenizer_kinds(config.model.get("family", "bert")))
  corpora, _ = pipeline.load_corpora(config.data, tokenizer)
  corpus = corpora[0]
  vectors, counts = word_vectors(corpus, config.model.vocab_size, dim, _WINDOW.value)
  storage.makedirs(storage.parent(storage.absolute(_OUTPUT.value)))
  data = io.BytesIO()
  np.savez(data, vectors=vectors, counts=counts, window=_WINDOW.value,
           sources=np.array(corpus.sources), vocab=np.array(config.data.vocab_path),
           tokens=corpus.num_tokens)
  storage.write_bytes(_OUTPUT.value, data.getvalue())  # local, or a bucket's object
  print(f"Wrote {_OUTPUT.value}: {vectors.shape[0]} x {dim} vectors ({int((counts > 0).sum())} "
        f"pieces occur) from {corpus.num_tokens:,} tokens of {corpus.num_documents} documents, "
        f"window {_WINDOW.value}, in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
  cli.run(main, urls=("output",))
