"""The tokenizer kind comes from the config or the family; a folder's files are only
checked against it (text/tokenizers.py KINDS, models/families.py Family.tokenizers)."""
import dataclasses
import shutil

import ml_collections
import pytest

from bert_jax.weights import hf_families
from bert_jax.models import families as model_families
from bert_jax.text import tokenizers


def _data_config(**fields) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({"data_dir": "", "vocab_path": "", "lower_case": True,
                                    "tokenizer": "", **fields})


@pytest.fixture
def mixed_folder(tmp_path, vocab_path):
  """A folder with a WordPiece vocab.txt and a (dummy) SentencePiece spiece.model."""
  shutil.copyfile(vocab_path, tmp_path / "vocab.txt")
  (tmp_path / "spiece.model").write_bytes(b"not read")
  return str(tmp_path)


def test_the_family_kinds_decide_which_files_are_read(mixed_folder):
  with pytest.raises(ValueError, match=r"holds WordPiece \(vocab.txt\) and SentencePiece"):
    tokenizers.make_tokenizer(_data_config(vocab_path=mixed_folder))
  wordpiece = tokenizers.make_tokenizer(_data_config(vocab_path=mixed_folder),
                                        kinds=("wordpiece",))
  assert (wordpiece.kind, wordpiece.vocab_size) == ("wordpiece", 30522)
  assert model_families.tokenizer_kinds("roberta")[0] == "bpe"
  assert model_families.tokenizer_kinds("albert")[0] == "sentencepiece"


def test_config_data_tokenizer_names_the_kind(mixed_folder):
  config = _data_config(vocab_path=mixed_folder, tokenizer="wordpiece")
  assert tokenizers.make_tokenizer(config, kinds=("sentencepiece",)).kind == "wordpiece"
  with pytest.raises(FileNotFoundError, match=r"vocab_path: no tokenizer in .*; expected "
                     r"exactly one of vocab.json \+ merges.txt \(byte-level BPE\)") as raised:
    tokenizers.make_tokenizer(_data_config(vocab_path=mixed_folder, tokenizer="bpe"))
  assert mixed_folder in str(raised.value) and "\n" not in str(raised.value)
  with pytest.raises(ValueError, match=r"config.data.tokenizer: tokenizer kind\(s\) "
                     r"\['wordpeice'\] not in"):
    tokenizers.make_tokenizer(_data_config(vocab_path=mixed_folder, tokenizer="wordpeice"))


def test_a_vocab_file_must_be_of_the_family_kind(vocab_path):
  with pytest.raises(ValueError, match=r"vocab.txt: not a vocabulary of the expected kind; "
                     r"expected a .model file \(sentencepiece\) or a folder"):
    tokenizers.make_tokenizer(_data_config(vocab_path=vocab_path), kinds=("sentencepiece",))


def test_a_family_naming_an_unknown_kind_is_a_one_line_error(monkeypatch):
  bad = dataclasses.replace(model_families.FAMILIES["bert"], tokenizers=("wordpeice",))
  monkeypatch.setitem(model_families.FAMILIES, "bert", bad)
  with pytest.raises(ValueError, match=r"FAMILIES\['bert'\].tokenizers: tokenizer kind\(s\) "
                     r"\['wordpeice'\] not in"):
    hf_families.check_tables()
