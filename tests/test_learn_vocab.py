"""learn_vocab: a vocabulary learned from text (WordPiece, byte-level BPE, SentencePiece)
loads in our tokenizer and HF's."""
import os

import ml_collections
import pytest
import transformers

from bert_jax.text import learn_vocab
from bert_jax.text import tokenizers
from bert_jax.text.subword import SPECIAL_TOKENS
from bert_jax.text.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def text_file(tmp_path_factory, data_dir):
  """The first 3,000 lines of WikiText-2 valid, plus a literal [MASK] to be ignored."""
  with open(os.path.join(data_dir, "wikitext-2", "valid.txt"), encoding="utf-8") as f:
    lines = [next(f) for _ in range(3000)]
  path = tmp_path_factory.mktemp("vocab") / "text.txt"
  path.write_text("".join(lines) + "a line with [MASK] in it\n", encoding="utf-8")
  return str(path)


@pytest.mark.slow
def test_learned_vocab_tokenizes_like_hf(text_file, tmp_path):
  vocab = learn_vocab.learn_vocab([text_file], vocab_size=1000, min_count=2)
  assert tuple(vocab[:len(SPECIAL_TOKENS)]) == SPECIAL_TOKENS
  assert 900 <= len(vocab) <= 1000 and len(set(vocab)) == len(vocab)
  assert not any(0xE000 <= ord(ch) < 0xF000 for token in vocab for ch in token)
  path = str(tmp_path / "vocab.txt")
  learn_vocab.write_vocab(vocab, path)
  ours = WordPieceTokenizer(path, lower_case=True)
  hf = transformers.BertTokenizerFast(vocab=path, do_lower_case=True)
  with open(text_file, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()][:500]
  ours_ids = ours.encode(lines)
  assert ours_ids == [hf(line, add_special_tokens=False)["input_ids"] for line in lines]
  pieces = sum(len(ids) for ids in ours_ids)
  unknown = sum(ids.count(ours.unk_id) for ids in ours_ids)
  assert unknown / pieces < 0.002  # every character seen in the text has a piece
  # frequent words are whole tokens
  assert {"the", "of", "and", "in"} <= set(vocab)


def test_bad_inputs(tmp_path):
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    learn_vocab.learn_vocab([str(tmp_path / "missing.txt")], 100)
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n", encoding="utf-8")
  with pytest.raises(ValueError, match="no words"):
    learn_vocab.learn_vocab([str(empty)], 100)
  with pytest.raises(ValueError, match="leaves no room"):
    learn_vocab.learn_vocab([str(empty)], 5)


@pytest.mark.parametrize("kind,ours_class,hf_class", [
    ("bpe", "BPETokenizer", transformers.RobertaTokenizerFast),
    ("sentencepiece", "SentencePieceTokenizer", transformers.AlbertTokenizerFast)])
def test_other_kinds_make_a_vocab_path(text_file, tmp_path, kind, ours_class, hf_class):
  """(WordPiece is the test above.) The output folder is a config.data.vocab_path."""
  output = str(tmp_path / kind)
  size = learn_vocab.learn_and_write(kind, [text_file], output, vocab_size=600)
  assert size == 600
  data_config = ml_collections.ConfigDict(
      {"data_dir": "", "vocab_path": output, "lower_case": True})
  ours = tokenizers.make_tokenizer(data_config)
  assert type(ours).__name__ == ours_class and ours.vocab_size == size
  lines = ["The Valkyria Chronicles III , a <unk> game .", "Senjō no Valkyria 3 !"]
  hf = hf_class.from_pretrained(output)
  assert ours.encode(lines) == hf(lines, add_special_tokens=False)["input_ids"]


def test_kind_errors(text_file, tmp_path):
  with pytest.raises(ValueError, match="unknown vocabulary kind 'bert'"):
    learn_vocab.learn_and_write("bert", [text_file], str(tmp_path / "x"), 600)
  with pytest.raises(ValueError, match="byte-level BPE keeps case"):
    learn_vocab.learn_and_write("bpe", [text_file], str(tmp_path / "x"), 600, lower_case=True)
