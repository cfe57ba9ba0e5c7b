"""WordPieceTokenizer: parity with HF BertTokenizerFast, errors.

(BPE and SentencePiece: tests/test_tokenizers_family.py.)

Hugging Face (torch + transformers) is a test-only dependency; the tests that compare
with it are skipped without it. Tests that need ../shared/data skip without it.
"""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_jax.text import paths
from bert_jax.text import subword
from bert_jax.text import wordpiece as tokenizer
from tests.helpers.tokenizer_samples import parity_bench, write_lines

_VOCAB = "bert/uncased_L-12_H-768_A-12/vocab.txt"
_SAMPLE_LINES = 2000

# Hand-written edge cases for each rule in tokenizer.py's docstring.
_EDGE_CASES = (
    "", "   ", "\t\n", "Hello, World!", "don't stop-believing... (ok?)",
    "Café naïve Ångström résumé Zoë façade", "İstanbul ΟΔΟΣ Σ ς straße ﬁ µ ǅ",
    "ＦＵＬＬ ｗｉｄｔｈ ２０２４", "中文字符 日本語のテキスト 한국어 ㄱ 㐀 \U0002B820 \U0002B920",
    "$5^2 = `x` | a~b @user #tag 50% <b> {x} [y] a_b",
    "\\ \"q\" +1 ©€™ ¡¿ «» ½ … ² ‑ ¡§war¡¨",
    "a\x00b \x07c d\u200be \ufffdf g\x85h i\x0bj k\x1cl m\u00adn today\x12s \x13q\x14",
    "a\u2028b\u00a0c\u3000d\te\nf\rg\u2003h\u202fi",
    "a" * 100, "a" * 101, "é" * 60, "x" * 99 + "中",
    "[CLS] hello [SEP] world [MASK]ed [PAD] [UNK]x",
    "[unk] [ MASK ] [[SEP]] [MA\x00SK] [MA\ue000SK]",
    "\ue000 \ue001x private use", "🙂 emoji ☃☃ ⁂ ⅓ ²", "xqzvj qqqqq", "##ing ##",
    "word\u0301 a\u0300\u0301\u0302 \u0301", "ά ῷ Ǻ Å Ω K", "ᾼ ǰ ﬀ",
    "ǃ ־ ׳ ؛ । ‐ – — ‘ ’ “ ” • … ‹ › ※ 〈 〉 「 」 ・", "\u166d \u1734 \u061d \u2e43",
    "x\u1fefy \u1fed \u037e \u2000a\u2001b",
)


def _data_dir() -> str:
  data_dir = paths.default_data_dir()
  if not data_dir or not os.path.isfile(os.path.join(data_dir, _VOCAB)):
    pytest.skip(f"BERT vocab not found under the data root {data_dir!r}")
  return data_dir


@pytest.fixture(scope="module")
def vocab_path() -> str:
  return os.path.join(_data_dir(), _VOCAB)


@pytest.fixture(scope="module")
def ours(vocab_path) -> tokenizer.WordPieceTokenizer:
  return tokenizer.WordPieceTokenizer(vocab_path)


@pytest.fixture(scope="module")
def hf(vocab_path):
  pytest.importorskip("transformers")
  return parity_bench().hf_bert_tokenizer(vocab_path, lower_case=True)


def _hf_ids(hf_tokenizer, texts):
  return hf_tokenizer(list(texts), add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------------------------
# Parity with HF on hand-written cases and on every BMP code point.
# ------------------------------------------------------------------------------------
def test_special_ids_and_attributes(ours):
  assert ours.vocab_size == len(ours.vocab) == 30522
  assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == (
      0, 100, 101, 102, 103)
  assert ours.lower_case


@pytest.mark.parametrize("lower_case", [True, False])
def test_edge_cases_match_hf(vocab_path, lower_case):
  parity = parity_bench()
  pytest.importorskip("transformers")
  hf_tokenizer = parity.hf_bert_tokenizer(vocab_path, lower_case=lower_case)
  ours = tokenizer.WordPieceTokenizer(vocab_path, lower_case=lower_case)
  for text, mine, theirs in zip(_EDGE_CASES, ours.encode(_EDGE_CASES),
                                _hf_ids(hf_tokenizer, _EDGE_CASES)):
    assert mine == theirs, text


def test_rules_by_example(ours):
  """A few rules spelled out as ids, independent of HF."""
  tokens = lambda text: [ours.vocab[i] for i in ours.encode([text])[0]]
  assert tokens("Café") == ["cafe"]
  assert tokens("ΟΔΟΣ") == tokens("οδοσ")  # Σ -> σ even word-finally.
  assert tokens("$5^") == ["$", "5", "^"]
  assert tokens("中文") == ["中", "文"]
  assert tokens("a\x00b") == tokens("ab")
  assert tokens("a" * 101) == ["[UNK]"]
  assert tokens("é" * 60) != ["[UNK]"]  # 120 bytes but 60 characters.
  assert tokens("[MASK]ed [mask]") == ["[MASK]", "ed", "[", "mask", "]"]
  assert ours.encode(["", " "]) == [[], []]


def test_every_bmp_code_point_matches_hf(ours, hf):
  """Normalised words of 'a<c>b' for every BMP code point c equal HF's.

  The only exceptions are letters whose lowercase mapping is newer than the ICU inside
  TensorFlow (Unicode 14-16 additions), documented in tokenizer.py.
  """
  known = {0x1C89, 0x2C2F, 0xA7C0, 0xA7CB, 0xA7CC, 0xA7CE, 0xA7D0, 0xA7D2, 0xA7D4,
           0xA7D6, 0xA7D8, 0xA7DA, 0xA7DC}
  code_points = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
  texts = [f"a{chr(c)}b" for c in code_points]
  backend = hf.backend_tokenizer
  theirs = [[word for word, _ in backend.pre_tokenizer.pre_tokenize_str(
      backend.normalizer.normalize_str(text))] for text in texts]
  mine = [[word.decode("utf-8") for word in words]
          for words in ours.split_words(tf.constant(texts)).to_list()]
  differing = {c for c, a, b in zip(code_points, mine, theirs) if a != b}
  assert differing <= known, sorted(hex(c) for c in differing - known)


def test_cased_vocab_matches_hf(tmp_path):
  transformers = pytest.importorskip("transformers")
  vocab = list(subword.SPECIAL_TOKENS) + [
      "Hello", "hello", "##lo", "Hel", "Café", "cafe", "Ca", "##fé", "##fe", "naïve",
      "Ω", "ΟΔΟΣ", "straße", ",", "!", "中", "##s", "s", "World", "world"]
  vocab_path = write_lines(tmp_path / "vocab.txt", vocab)
  hf_cased = transformers.BertTokenizerFast(vocab=vocab_path, do_lower_case=False)
  assert hf_cased.vocab_size == len(vocab)
  ours = tokenizer.WordPieceTokenizer(vocab_path, lower_case=False)
  texts = ["Hello, World!", "hello world", "Café cafe Cafés", "naïve naive", "ΟΔΟΣ Ω",
           "straße STRASSE", "中中s", "Hellos HELLO", "[MASK] [SEP]s"]
  assert ours.encode(texts) == _hf_ids(hf_cased, texts)
  assert ours.encode(["Café"]) == [[vocab.index("Café")]]


# ------------------------------------------------------------------------------------
# Model inputs: [CLS] a [SEP] (b [SEP]), truncation, padding.
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("len_a,len_b,budget,expected", [
    (3, 4, 10, (3, 4)), (10, 2, 6, (4, 2)), (2, 10, 6, (2, 4)), (10, 10, 6, (3, 3)),
    (10, 10, 5, (2, 3)), (10, 9, 5, (3, 2)), (9, 10, 5, (2, 3)), (0, 10, 4, (0, 4)),
])
def test_truncated_pair_lengths(len_a, len_b, budget, expected):
  assert subword.truncated_pair_lengths(len_a, len_b, budget) == expected


def test_encode_for_model_matches_hf(ours, hf):
  words = ("the quick brown fox jumps over the lazy dog while unbelievably "
           "extraordinary tokenization happens").split()
  texts_a, texts_b = [], []
  for len_a in range(0, 15, 2):
    for len_b in range(0, 15, 3):
      texts_a.append(" ".join(words[:len_a]))
      texts_b.append(" ".join(words[-len_b:] if len_b else []))
  for max_length in (5, 8, 9, 16, 33):
    for b in (None, texts_b):
      mine = ours.encode_for_model(texts_a, b, max_length=max_length)
      theirs = hf(texts_a, b, truncation="longest_first", padding="max_length",
                  max_length=max_length, return_tensors="np")
      for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert mine[key].dtype == np.int32
        assert mine[key].shape == (len(texts_a), max_length)
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)


def test_encode_for_model_layout(ours):
  batch = ours.encode_for_model(["hello world"], ["hi"], max_length=8)
  np.testing.assert_array_equal(
      batch["input_ids"], [[101, 7592, 2088, 102, 7632, 102, 0, 0]])
  np.testing.assert_array_equal(batch["token_type_ids"], [[0, 0, 0, 0, 1, 1, 0, 0]])
  np.testing.assert_array_equal(batch["attention_mask"], [[1, 1, 1, 1, 1, 1, 0, 0]])
  with pytest.raises(ValueError, match="max_length"):
    ours.encode_for_model(["a"], ["b"], max_length=2)


# ------------------------------------------------------------------------------------
# Graph use, decode, loading.
# ------------------------------------------------------------------------------------
def test_tokenize_inside_tf_data(ours):
  texts = ["Hello world!", "", "Tokenizers run in-graph."]
  expected = ours.encode(texts)
  batched = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(ours.tokenize)
  assert [row for batch in batched for row in batch.to_list()] == expected
  unbatched = tf.data.Dataset.from_tensor_slices(texts).map(ours.tokenize)
  assert [ids.numpy().tolist() for ids in unbatched] == expected
  assert ours.tokenize(tf.constant(texts)).flat_values.dtype == tf.int32


def test_decode(ours):
  ids = ours.encode_for_model(["Unbelievable tokenization!"], max_length=12)
  assert ours.decode(ids["input_ids"][0]) == "[CLS] unbelievable tokenization ! [SEP]"


def test_from_pretrained_dir(tmp_path):
  write_lines(tmp_path / "vocab.txt", list(subword.SPECIAL_TOKENS) + ["Ab", "ab"])
  assert tokenizer.WordPieceTokenizer.from_pretrained_dir(str(tmp_path)).lower_case
  (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
  cased = tokenizer.WordPieceTokenizer.from_pretrained_dir(str(tmp_path))
  assert not cased.lower_case
  assert cased.encode(["Ab ab"]) == [[5, 6]]


@pytest.mark.parametrize("lines,error,pattern", [
    (None, FileNotFoundError, "not found"),
    ([], ValueError, "is empty"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "a"], ValueError,
     r"repeats token 'a' on lines 6 and 8"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], ValueError, r"lacks .*\[MASK\]"),
])
def test_bad_vocab_errors(tmp_path, lines, error, pattern):
  path = tmp_path / "vocab.txt"
  if lines is not None:
    write_lines(path, lines)
  with pytest.raises(error, match=pattern) as raised:
    tokenizer.WordPieceTokenizer(str(path))
  message = str(raised.value)
  assert str(path) in message and "\n" not in message


# ------------------------------------------------------------------------------------
# Parity on a real sample of every corpus (the full run is bench/tokenizer_parity.py).
# ------------------------------------------------------------------------------------
def test_corpus_sample_parity(ours, hf):
  parity = parity_bench()
  corpora = parity.corpus_lines(_data_dir(), max_lines=_SAMPLE_LINES)
  assert len(corpora) >= 8
  for name, lines in corpora.items():
    assert lines, name
    mine, theirs = parity.encode_both(ours, hf, lines)
    bad = [line for line, a, b in zip(lines, mine, theirs) if a != b]
    assert not bad, f"{name}: {len(bad)} of {len(lines)} lines differ, e.g. {bad[0]!r}"
