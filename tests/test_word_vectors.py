"""Count-based word vectors (bert_jax/pretrain/word_vectors.py) and config.init_word_vectors."""
import collections
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse

from bert_jax import weights
from bert_jax.run import init_chain
from bert_jax.run import trainer
from bert_jax.models.config import config_for_size
from bert_jax.pretrain import word_vectors
from bert_jax.text import corpus as corpus_lib
from tests.helpers.runs import REPO, tiny_pretraining_config


def _corpus(documents: list[list[list[int]]]) -> corpus_lib.TokenizedCorpus:
  sentences = [s for doc in documents for s in doc]
  lengths = [len(s) for s in sentences]
  return corpus_lib.TokenizedCorpus(
      token_ids=np.array([t for s in sentences for t in s], np.int32),
      sentence_starts=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
      document_starts=np.concatenate([[0], np.cumsum([len(d) for d in documents])]
                                     ).astype(np.int64),
      sources=("test",))


def test_counts_pairs_within_the_window_and_never_across_documents():
  rng = np.random.default_rng(0)
  documents = [[list(rng.integers(0, 12, size=rng.integers(1, 9))) for _ in range(3)]
               for _ in range(5)]
  window = 3
  expected = collections.Counter()
  for doc in documents:  # plain Python: a document's sentences are one stream
    stream = [t for sentence in doc for t in sentence]
    for i, a in enumerate(stream):
      for j in range(max(0, i - window), min(len(stream), i + window + 1)):
        if j != i:
          expected[(a, stream[j])] += 1
  counts = word_vectors.cooccurrence(_corpus(documents), 12, window).toarray()
  dense = np.zeros((12, 12))
  for (a, b), n in expected.items():
    dense[a, b] = n
  np.testing.assert_array_equal(counts, dense)


def test_ppmi_is_the_smoothed_positive_pmi_of_the_counts():
  rng = np.random.default_rng(1)
  counts = rng.integers(0, 5, size=(7, 7)).astype(np.float64)
  counts = counts + counts.T
  contexts = counts.sum(0) ** 0.75
  with np.errstate(divide="ignore"):
    pmi = np.log(counts * contexts.sum() / (counts.sum(1)[:, None] * contexts[None, :]))
  expected = np.where(counts > 0, np.maximum(pmi, 0.0), 0.0)
  got = word_vectors.ppmi(scipy.sparse.csr_matrix(counts)).toarray()
  np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_vectors_put_pieces_that_share_contexts_together():
  """Pieces 1 and 2 only ever appear between the same neighbours (0 _ 3), 4 and 5 between
  others (6 _ 7): each pair's vectors are closer to each other than to the other pair's."""
  rng = np.random.default_rng(2)
  documents = [[[0, int(rng.choice([1, 2])), 3], [6, int(rng.choice([4, 5])), 7]]
               for _ in range(200)]
  vectors, counts = word_vectors.word_vectors(_corpus(documents), 8, dim=3, window=1)
  assert vectors.shape == (8, 3) and vectors.dtype == np.float32
  np.testing.assert_array_equal(counts, np.bincount(_corpus(documents).token_ids, minlength=8))
  unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
  assert unit[1] @ unit[2] > 0.9 and unit[4] @ unit[5] > 0.9
  assert abs(unit[1] @ unit[4]) < 0.5
  with pytest.raises(ValueError, match="window=0"):
    word_vectors.word_vectors(_corpus(documents), 8, dim=3, window=0)


def _vectors_file(tmp_path, vocab_size, width, seen):
  vectors = np.random.default_rng(3).normal(0, 5.0, (vocab_size, width)).astype(np.float32)
  counts = np.where(seen, 4, 0)
  path = str(tmp_path / "vectors.npz")
  np.savez(path, vectors=vectors, counts=counts)
  return path, vectors


def test_init_word_vectors_rescales_the_rows_that_occur_and_keeps_the_rest(tmp_path):
  config = config_for_size("tiny", vocab_size=50)
  rng = np.random.default_rng(4)
  table = rng.normal(0, 0.02, (50, config.hidden_size)).astype(np.float32)
  params = {"bert": {"embeddings": {"word_embeddings": {"embedding": table}},
                     "pooler": {"kernel": np.ones((2, 2), np.float32)}}}
  seen = np.arange(50) >= 5  # 0-4: specials that never occur
  path, vectors = _vectors_file(tmp_path, 50, config.hidden_size, seen)
  out, notes = init_chain.init_word_vectors(params, path, config)
  got = np.asarray(out["bert"]["embeddings"]["word_embeddings"]["embedding"])
  np.testing.assert_array_equal(got[:5], table[:5])
  scale = table.std() / vectors[5:].astype(np.float64).std()
  np.testing.assert_allclose(got[5:], vectors[5:] * scale, rtol=1e-6)
  assert got[5:].std() == pytest.approx(table.std(), rel=1e-4)
  np.testing.assert_array_equal(out["bert"]["pooler"]["kernel"], 1.0)
  assert "45 of 50 rows" in notes[0]

  out, _ = init_chain.init_word_vectors(params, path, config, std=0.06)  # a trained table's scale
  got = np.asarray(out["bert"]["embeddings"]["word_embeddings"]["embedding"])
  np.testing.assert_allclose(got[5:], vectors[5:] * (0.06 / vectors[5:].std()), rtol=1e-5)
  np.testing.assert_array_equal(got[:5], table[:5])
  with pytest.raises(ValueError, match="init_word_vectors_std=-1"):
    init_chain.init_word_vectors(params, path, config, std=-1.0)

  with pytest.raises(ValueError, match="vocab_size 60"):
    init_chain.init_word_vectors(params, path, config_for_size("tiny", vocab_size=60))
  narrow, _ = _vectors_file(tmp_path, 50, 8, seen)
  with pytest.raises(ValueError, match="embedding width"):
    init_chain.init_word_vectors(params, narrow, config)
  with pytest.raises(ValueError, match="not a word-vector .npz"):
    init_chain.init_word_vectors(params, str(tmp_path / "missing.npz"), config)


def test_fresh_start_chains_init_from_or_random_init_then_the_vectors(tmp_path):
  """The trainer's fresh-run start: random_init keeps the fresh params (None) unless the
  vectors change them; the vectors go over init_from's architecture only with random_init;
  the fresh params are read only when something changes them."""
  import ml_collections

  config = config_for_size("tiny", vocab_size=50)
  table = np.random.default_rng(0).normal(0, 0.02, (50, config.hidden_size)).astype(np.float32)
  fresh = {"bert": {"embeddings": {"word_embeddings": {"embedding": table}}}}
  path, vectors = _vectors_file(tmp_path, 50, config.hidden_size, np.arange(50) >= 5)
  reads = []

  def get_params():
    reads.append(1)
    return fresh

  run = lambda **kw: init_chain.fresh_start(  # noqa: E731
      ml_collections.ConfigDict({"init_from": "", "random_init": False,
                                 "init_word_vectors": "", "init_word_vectors_std": 0.0, **kw}),
      get_params, config)
  assert run() == (None, []) and not reads
  params, lines = run(init_from="some/model", random_init=True)
  assert params is None and "Random initialisation" in lines[0] and not reads
  params, lines = run(init_from="some/model", random_init=True, init_word_vectors=path,
                      init_word_vectors_std=0.5)
  got = params["bert"]["embeddings"]["word_embeddings"]["embedding"]
  assert reads == [1] and len(lines) == 2 and lines[1].startswith(f"Word embeddings from {path}")
  assert np.asarray(got)[5:].std() == pytest.approx(0.5, rel=1e-4)
  with pytest.raises(ValueError, match="init_from's weights bring their own"):
    run(init_from="some/model", init_word_vectors=path)  # refused before loading anything


@pytest.mark.slow
def test_the_cli_writes_vectors_that_a_pretraining_run_starts_from(corpus, tmp_path):
  config = tiny_pretraining_config(corpus, num_train_steps=1, eval_every_steps=0,
                                   eval_batches=1)
  config_file = tmp_path / "config.py"
  config_file.write_text(
      "import sys\nsys.path.insert(0, %r)\nfrom tests.helpers.runs import tiny_pretraining_config\n"
      "def get_config():\n  return tiny_pretraining_config(%r, num_train_steps=1)\n"
      % (REPO, corpus))
  output = str(tmp_path / "vectors.npz")
  subprocess.run([sys.executable, "-m", "bert_jax.pretrain.word_vectors",
                  f"--config={config_file}", f"--output={output}", "--window=2"],
                 cwd=REPO, check=True, capture_output=True)
  with np.load(output) as data:
    vectors, counts = data["vectors"], data["counts"]
  assert vectors.shape == (config.model.vocab_size, config.model.hidden_size)
  assert counts.sum() > 0 and counts[:5].sum() == 0  # [PAD], [unused*]: never in the text

  config.init_word_vectors = output
  config.optim.learning_rate = 0.0  # step 1 keeps the initial params
  config.optim.weight_decay = 0.0
  workdir = str(tmp_path / "run")
  trainer.train_and_evaluate(config, workdir)
  params = weights.load_params(workdir)[1]
  table = np.asarray(params.get("bert", params)["embeddings"]["word_embeddings"]["embedding"])
  seen = counts > 0
  unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
  np.testing.assert_allclose(unit(table[seen]), unit(vectors[seen]), atol=1e-5)
