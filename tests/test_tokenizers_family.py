"""Byte-level BPE (RoBERTa) and SentencePiece (ALBERT) tokenizers; make_tokenizer's choice.

Each kind learns a small vocabulary from the first 3,000 lines of WikiText-2, then gives
the reference's ids on a sample of every corpus in the data root (the full run is
bench/tokenizer_parity.py --kind=bpe|sentencepiece): HF's RobertaTokenizerFast /
AlbertTokenizerFast loaded from the folder we saved, and for SentencePiece also the
`sentencepiece` library itself.
"""
import importlib.util
import json
import os
import pathlib
import re

import ml_collections
import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from bert_jax.text import bpe
from bert_jax.text import corpus
from bert_jax.text import sentencepiece_vocab
from bert_jax.text import tokenizers
from bert_jax.text import wordpiece

transformers = pytest.importorskip("transformers")

_BENCH_DIR = pathlib.Path(__file__).resolve().parents[1] / "bench"
_SAMPLE_LINES = 300  # per corpus
_EDGE_CASES = (
    "", "   ", "\t\n", "Hello, World!", " leading and trailing spaces  ",
    "Café naïve Ångström résumé Zoë façade ΟΔΟΣ straße ﬁ µ", "中文字符 日本語 한국어 🙂☃",
    "``quoted'' and ` single ' and ''''", "a\x00b \x07c d\u200be \ufffdf g\x85h \u00adi",
    "a\u2028b\u00a0c\u3000d\te\nf\rg", "[CLS] x [SEP] y [MASK]ed [PAD] [UNK]x [cls]",
    "<s>x</s> <pad><unk>y hello <mask> world <mask>", "A\u0301 e\u0301 final\u0301",
    "$7,000,000,000. 0.1-0-0-0 1990, 3,",
)


def _parity_bench():
  spec = importlib.util.spec_from_file_location(
      "tokenizer_parity", _BENCH_DIR / "tokenizer_parity.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _write_lines(path: pathlib.Path, lines) -> str:
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


def _data_config(**fields) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({"data_dir": "", "vocab_path": "", "lower_case": True,
                                    **fields})


@pytest.fixture(scope="module")
def training_text(tmp_path_factory, data_dir) -> str:
  lines = [line for line in _parity_bench().wikitext_texts(data_dir) if line.strip()]
  return _write_lines(tmp_path_factory.mktemp("text") / "train.txt", lines[:3000])


@pytest.fixture(scope="module")
def sample_lines(data_dir) -> list[str]:
  corpora = _parity_bench().corpus_lines(data_dir, max_lines=_SAMPLE_LINES)
  assert len(corpora) >= 8 and all(corpora.values())
  return [line for lines in corpora.values() for line in lines] + list(_EDGE_CASES)


def _mismatches(ours: list[list[int]], theirs: list[list[int]], lines) -> list[str]:
  assert len(ours) == len(theirs) == len(lines)
  return [line for line, a, b in zip(lines, ours, theirs) if list(a) != list(b)]


# ------------------------------------------------------------------------------------
# Byte-level BPE.
# ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bpe_folder(tmp_path_factory, training_text) -> str:
  folder = str(tmp_path_factory.mktemp("bpe"))
  bpe.train_bpe([training_text], folder, vocab_size=1000)
  return folder


@pytest.fixture(scope="module")
def ours_bpe(bpe_folder) -> bpe.BPETokenizer:
  return bpe.BPETokenizer.from_pretrained_dir(bpe_folder)


@pytest.fixture(scope="module")
def hf_roberta(bpe_folder):
  return transformers.RobertaTokenizerFast.from_pretrained(bpe_folder)


def test_bpe_vocab_layout(bpe_folder, ours_bpe):
  assert sorted(os.listdir(bpe_folder)) == [
      "merges.txt", "special_tokens_map.json", "tokenizer_config.json", "vocab.json"]
  assert ours_bpe.vocab_size == len(ours_bpe.vocab) == 1000
  assert ours_bpe.vocab[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
  assert (ours_bpe.cls_id, ours_bpe.pad_id, ours_bpe.sep_id, ours_bpe.unk_id,
          ours_bpe.mask_id) == (0, 1, 2, 3, 999)
  assert not ours_bpe.lower_case
  assert {"Ġthe", "Ġ,"} <= set(ours_bpe.vocab)


def test_bpe_ids_equal_hf_roberta(bpe_folder, ours_bpe, hf_roberta, sample_lines):
  assert isinstance(transformers.AutoTokenizer.from_pretrained(bpe_folder),
                    transformers.RobertaTokenizer)
  assert hf_roberta.vocab_size == ours_bpe.vocab_size
  assert (hf_roberta.cls_token_id, hf_roberta.pad_token_id, hf_roberta.sep_token_id,
          hf_roberta.unk_token_id, hf_roberta.mask_token_id) == (0, 1, 2, 3, 999)
  theirs = hf_roberta(sample_lines, add_special_tokens=False)["input_ids"]
  assert not _mismatches(ours_bpe.encode(sample_lines), theirs, sample_lines)
  # Literal special tokens are their ids; <mask> takes the space before it.
  assert ours_bpe.encode(["x <mask>"])[0][-1] == ours_bpe.mask_id
  assert len(ours_bpe.encode(["x <mask>"])[0]) == 2
  assert ours_bpe.encode(["<unk>"]) == [[3]]


def test_bpe_encode_for_model_matches_hf(ours_bpe, hf_roberta):
  words = ("the quick brown fox jumps over the lazy dog while unbelievably "
           "extraordinary tokenization happens").split()
  texts_a = [" ".join(words[:n]) for n in range(0, 15, 2) for _ in range(0, 15, 3)]
  texts_b = [" ".join(words[-n:] if n else []) for _ in range(0, 15, 2)
             for n in range(0, 15, 3)]
  for max_length in (6, 9, 10, 17, 33):
    for b in (None, texts_b):
      mine = ours_bpe.encode_for_model(texts_a, b, max_length=max_length)
      theirs = hf_roberta(texts_a, b, truncation="longest_first", padding="max_length",
                          max_length=max_length, return_token_type_ids=True,
                          return_tensors="np")
      for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert mine[key].dtype == np.int32
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=f"{key} {max_length}")
  batch = ours_bpe.encode_for_model(["a b"], ["c"], max_length=10)
  a, b = ours_bpe.encode(["a b"])[0], ours_bpe.encode(["c"])[0]
  layout = [0, *a, 2, 2, *b, 2]
  assert batch["input_ids"].tolist() == [layout + [1] * (10 - len(layout))]
  assert batch["token_type_ids"].tolist() == [[0] * 10]
  assert batch["attention_mask"].tolist() == [[1] * len(layout) + [0] * (10 - len(layout))]
  with pytest.raises(ValueError, match="max_length"):
    ours_bpe.encode_for_model(["a"], ["b"], max_length=3)


def test_bpe_in_tf_data_and_the_pretraining_reader(ours_bpe, tmp_path):
  texts = ["Hello world!", "", "Tokenizers run in front of the graph.", "é中🙂"]
  expected = ours_bpe.encode(texts)
  batched = tf.data.Dataset.from_tensor_slices(texts).batch(3).map(ours_bpe.tokenize)
  assert [row for batch in batched for row in batch.to_list()] == expected
  single = tf.data.Dataset.from_tensor_slices(texts).map(ours_bpe.tokenize)
  assert [ids.numpy().tolist() for ids in single] == expected
  assert ours_bpe.tokenize(tf.constant(texts)).flat_values.dtype == tf.int32
  assert ours_bpe.decode(expected[0]) == "Hello world!"
  # corpus.py's stream takes it unchanged; literal <s> </s> <mask> <pad> are dropped.
  path = _write_lines(tmp_path / "plain.txt",
                      ["One sentence.", "Two <mask> sentences.", "", "Other doc.", "Last."])
  result = corpus.read_files([path], ours_bpe)
  assert (result.num_documents, result.num_sentences) == (2, 4)
  assert result.document_sentences(0)[1].tolist() == [
      i for i in ours_bpe.encode(["Two <mask> sentences."])[0] if i != ours_bpe.mask_id]


def test_bpe_save_load_roundtrip(ours_bpe, bpe_folder, tmp_path):
  again = tmp_path / "again"
  ours_bpe.save(str(again))
  for name in os.listdir(bpe_folder):
    assert (again / name).read_bytes() == pathlib.Path(bpe_folder, name).read_bytes(), name
  reloaded = bpe.BPETokenizer.from_pretrained_dir(str(again))
  assert reloaded.vocab == ours_bpe.vocab
  texts = ["Round trip, byte by byte: ü ß 🙂"]
  assert reloaded.encode(texts) == ours_bpe.encode(texts)


def test_bpe_bad_files(bpe_folder, tmp_path):
  vocab = json.loads(pathlib.Path(bpe_folder, "vocab.json").read_text(encoding="utf-8"))
  merges = os.path.join(bpe_folder, "merges.txt")
  with pytest.raises(FileNotFoundError, match="missing.json"):
    bpe.BPETokenizer(str(tmp_path / "missing.json"), merges)
  with pytest.raises(FileNotFoundError, match="nomerges.txt"):
    bpe.BPETokenizer(os.path.join(bpe_folder, "vocab.json"), str(tmp_path / "nomerges.txt"))
  swapped = dict(vocab, **{"<s>": 1, "<pad>": 0})
  path = tmp_path / "vocab.json"
  path.write_text(json.dumps(swapped), encoding="utf-8")
  with pytest.raises(ValueError, match=r"<s>=1, <pad>=0") as raised:
    bpe.BPETokenizer(str(path), merges)
  assert str(path) in str(raised.value) and "\n" not in str(raised.value)
  path.write_text(json.dumps(dict(vocab, extra=5000)), encoding="utf-8")
  with pytest.raises(ValueError, match="ids are not 0"):
    bpe.BPETokenizer(str(path), merges)
