"""Byte-level BPE (RoBERTa) and SentencePiece (ALBERT) tokenizers; make_tokenizer's choice.

Each kind learns a small vocabulary from the first 3,000 lines of WikiText-2, then gives
the reference's ids on a sample of every corpus in the data root (the full run is
bench/tokenizer_parity.py --kind=bpe|sentencepiece): HF's RobertaTokenizerFast /
AlbertTokenizerFast loaded from the folder we saved, and for SentencePiece also the
`sentencepiece` library itself.
"""
import json
import os
import pathlib

import ml_collections
import pytest
import sentencepiece as spm
import tensorflow as tf

from bert_jax.text import bpe
from bert_jax.text import corpus
from bert_jax.text import sentencepiece_vocab
from bert_jax.text import tokenizers
from bert_jax.text import wordpiece

from tests.helpers.tokenizer_samples import (assert_model_inputs_equal,  # noqa: F401
                                             EDGE_CASES, mismatches, parity_bench,
                                             sample_lines, training_text, write_lines)

transformers = pytest.importorskip("transformers")


def _data_config(**fields) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({"data_dir": "", "vocab_path": "", "lower_case": True,
                                    **fields})


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
      "merges.txt", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
      "vocab.json"]
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
  assert not mismatches(ours_bpe.encode(sample_lines), theirs, sample_lines)
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
  assert_model_inputs_equal(ours_bpe, hf_roberta, texts_a, texts_b, (6, 9, 10, 17, 33))
  batch = ours_bpe.encode_for_model(["a b"], ["c"], max_length=10)
  a, b = ours_bpe.encode(["a b"])[0], ours_bpe.encode(["c"])[0]
  layout = [0, *a, 2, 2, *b, 2]
  assert batch["input_ids"].tolist() == [layout + [1] * (10 - len(layout))]
  assert batch["token_type_ids"].tolist() == [[0] * 10]
  assert batch["attention_mask"].tolist() == [[1] * len(layout) + [0] * (10 - len(layout))]
  with pytest.raises(ValueError, match="max_length"):
    ours_bpe.encode_for_model(["a"], ["b"], max_length=3)


def test_bpe_split_words_equal_hf_roberta_with_prefix_space(bpe_folder, ours_bpe,
                                                           sample_lines):
  # Word-level tasks (CoNLL, SQuAD's context) encode whitespace words one by one, each as
  # it reads inside running text: HF RoBERTa's is_split_into_words with add_prefix_space.
  hf = transformers.RobertaTokenizerFast.from_pretrained(bpe_folder, add_prefix_space=True)
  for line in sample_lines[:200]:
    words = line.split()
    if not words:
      continue
    encoding = hf(words, is_split_into_words=True, add_special_tokens=False)
    theirs = [[] for _ in words]
    for piece, word in zip(encoding["input_ids"], encoding.word_ids()):
      theirs[word].append(piece)
    assert ours_bpe.encode_words(words) == theirs, line
  assert ours_bpe.encode_words(["the"]) == [[ours_bpe.vocab.index("Ġthe")]]
  assert ours_bpe.encode_words(["the"]) != ours_bpe.encode(["the"])


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
  path = write_lines(tmp_path / "plain.txt",
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


# ------------------------------------------------------------------------------------
# SentencePiece (ALBERT).
# ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spm_folder(tmp_path_factory, training_text) -> str:
  folder = tmp_path_factory.mktemp("spm")
  model = sentencepiece_vocab.train_sentencepiece(
      [training_text], str(folder / "spiece"), vocab_size=1000, num_threads=2)
  sentencepiece_vocab.SentencePieceTokenizer(model).save(str(folder))
  return str(folder)


def test_sentencepiece_layout_and_saved_settings(spm_folder):
  sp = sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(spm_folder)
  assert (sp.pad_id, sp.unk_id, sp.cls_id, sp.sep_id, sp.mask_id) == (0, 1, 2, 3, 4)
  assert sp.vocab_size == len(sp.vocab) == 1000
  assert sp.vocab[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert sp.lower_case and sp.keep_accents  # The model folds case itself.
  config = json.loads(pathlib.Path(spm_folder, "tokenizer_config.json").read_text())
  assert (config["do_lower_case"], config["keep_accents"]) == (False, True)


@pytest.mark.slow
@pytest.mark.parametrize("lower_case,keep_accents", [(False, True), (True, False)])
def test_sentencepiece_ids_equal_the_references(spm_folder, sample_lines, tmp_path,
                                                lower_case, keep_accents):
  ours = sentencepiece_vocab.SentencePieceTokenizer(
      os.path.join(spm_folder, "spiece.model"), lower_case, keep_accents)
  ours.save(str(tmp_path))
  mine = ours.encode(sample_lines)
  hf = transformers.AlbertTokenizerFast.from_pretrained(str(tmp_path))
  assert (hf.do_lower_case, hf.keep_accents) == (lower_case, keep_accents)
  theirs = hf(sample_lines, add_special_tokens=False)["input_ids"]
  # HF's own pipeline splits words at U+0085 and drops a combining mark that ends the
  # text; the sentencepiece library does neither (see sentencepiece_vocab.py).
  hf_quirks = [i for i, line in enumerate(sample_lines)
               if "\x85" in line or line.endswith("\u0301")]
  assert hf_quirks == [len(sample_lines) - len(EDGE_CASES) + 8,
                       len(sample_lines) - len(EDGE_CASES) + 12]
  kept = [i for i in range(len(sample_lines)) if i not in hf_quirks]
  assert not mismatches([mine[i] for i in kept], [theirs[i] for i in kept],
                         [sample_lines[i] for i in kept])
  if not lower_case:
    processor = spm.SentencePieceProcessor(model_file=os.path.join(spm_folder, "spiece.model"))
    reference = [parity_bench().albert_reference_ids(processor, line)
                 for line in sample_lines]
    assert not mismatches(mine, reference, sample_lines)


def test_sentencepiece_rules_by_example(spm_folder):
  sp = sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(spm_folder)
  assert sp.encode(["[CLS]", "x<unk>y", "[cls]"])[:2] == [
      [sp.cls_id], sp.encode(["x"])[0] + [sp.unk_id] + sp.encode(["y"])[0]]
  assert sp.encode(["[cls]"])[0] != [sp.cls_id]  # Case-sensitive, as HF's.
  assert sp.encode(["``a''"]) == sp.encode(['"a"'])
  stripping = sentencepiece_vocab.SentencePieceTokenizer(
      os.path.join(spm_folder, "spiece.model"), lower_case=True, keep_accents=False)
  assert stripping.encode(["Café ΟΔΟΣ"]) == stripping.encode(["cafe οδοσ"])


def test_sentencepiece_encode_for_model_matches_hf(spm_folder):
  ours = sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(spm_folder)
  hf = transformers.AlbertTokenizerFast.from_pretrained(spm_folder)
  assert_model_inputs_equal(ours, hf, ["The game began development in 2010 .", "",
                                       "a b c d e f g h i j k l m"],
                             ["It was released in Japan .", "x", ""], (5, 8, 13, 40))
  ids = ours.encode(["a new game"])[0]
  batch = ours.encode_for_model(["a new game"], ["x"], max_length=16)
  x = ours.encode(["x"])[0]
  layout = [ours.cls_id, *ids, ours.sep_id, *x, ours.sep_id]
  assert batch["input_ids"].tolist() == [layout + [ours.pad_id] * (16 - len(layout))]
  assert batch["token_type_ids"].tolist() == [
      [0] * (len(ids) + 2) + [1] * (len(x) + 1) + [0] * (16 - len(layout))]


def test_sentencepiece_tf_data_roundtrip(spm_folder, tmp_path):
  sp = sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(spm_folder)
  texts = ["The Valkyria series was released in Japan .", "a new game", ""]
  ids = sp.encode(texts)
  assert [sp.decode(row) for row in ids] == [text.lower() for text in texts]
  mapped = tf.data.Dataset.from_tensor_slices(texts).batch(3).map(sp.tokenize)
  assert next(iter(mapped)).to_list() == ids
  assert [x.numpy().tolist() for x in
          tf.data.Dataset.from_tensor_slices(texts).map(sp.tokenize)] == ids
  sp.save(str(tmp_path / "again"))
  for name in ("spiece.model", "tokenizer_config.json"):
    assert ((tmp_path / "again" / name).read_bytes()
            == pathlib.Path(spm_folder, name).read_bytes())
  (tmp_path / "bare").mkdir()
  (tmp_path / "bare" / "albert.model").write_bytes(
      pathlib.Path(spm_folder, "spiece.model").read_bytes())
  bare = sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(str(tmp_path / "bare"))
  assert (bare.lower_case, bare.keep_accents) == (True, False)  # HF AlbertTokenizer's defaults


def test_sentencepiece_cased_and_errors(tmp_path):
  text_path = write_lines(tmp_path / "t.txt", ["Alpha Beta alpha beta Gamma"] * 50)
  cased_model = sentencepiece_vocab.train_sentencepiece(
      [text_path], str(tmp_path / "cased"), vocab_size=30, lower_case=False,
      hard_vocab_limit=False)
  cased = sentencepiece_vocab.SentencePieceTokenizer(cased_model)
  assert not cased.lower_case
  assert cased.decode(cased.encode(["Alpha beta"])[0]) == "Alpha beta"
  lowering = sentencepiece_vocab.SentencePieceTokenizer(cased_model, lower_case=True)
  assert lowering.decode(lowering.encode(["ALPHA Beta"])[0]) == "alpha beta"
  with pytest.raises(FileNotFoundError, match="missing.model"):
    sentencepiece_vocab.SentencePieceTokenizer(str(tmp_path / "missing.model"))
  with pytest.raises(FileNotFoundError, match="nope.txt"):
    sentencepiece_vocab.train_sentencepiece([str(tmp_path / "nope.txt")],
                                            str(tmp_path / "x"), vocab_size=10)


# ------------------------------------------------------------------------------------
# make_tokenizer: the kind by the files.
# ------------------------------------------------------------------------------------
def test_make_tokenizer_by_folder(bpe_folder, spm_folder, vocab_path, tmp_path):
  (tmp_path / "bert").mkdir()
  (tmp_path / "bert" / "vocab.txt").write_bytes(pathlib.Path(vocab_path).read_bytes())
  expected = {str(tmp_path / "bert"): wordpiece.WordPieceTokenizer,
              bpe_folder: bpe.BPETokenizer,
              spm_folder: sentencepiece_vocab.SentencePieceTokenizer}
  for folder, kind in expected.items():
    by_model = tokenizers.make_tokenizer(_data_config(), model_dir=folder)
    by_vocab_path = tokenizers.make_tokenizer(_data_config(vocab_path=folder))
    assert type(by_model) is kind and type(by_vocab_path) is kind, folder
  # A TF checkpoint prefix names its folder.
  assert isinstance(tokenizers.make_tokenizer(
      _data_config(), model_dir=os.path.join(bpe_folder, "model.ckpt")), bpe.BPETokenizer)


def test_make_tokenizer_by_file(bpe_folder, spm_folder, vocab_path):
  wp = tokenizers.make_tokenizer(_data_config(vocab_path=vocab_path, lower_case=False))
  assert isinstance(wp, wordpiece.WordPieceTokenizer) and not wp.lower_case
  sp = tokenizers.make_tokenizer(_data_config(
      vocab_path=os.path.join(spm_folder, "spiece.model"), lower_case=True))
  assert isinstance(sp, sentencepiece_vocab.SentencePieceTokenizer)
  assert sp.encode(["ÉCOLE"]) == sp.encode(["école"])
  bp = tokenizers.make_tokenizer(_data_config(
      vocab_path=os.path.join(bpe_folder, "vocab.json")))
  assert isinstance(bp, bpe.BPETokenizer) and bp.vocab_size == 1000


def test_make_tokenizer_errors_are_one_line(bpe_folder, vocab_path, tmp_path):
  (tmp_path / "vocab.bin").write_bytes(b"x")
  (tmp_path / "empty").mkdir()
  (tmp_path / "both").mkdir()
  for name in ("vocab.json", "merges.txt"):
    (tmp_path / "both" / name).write_bytes(pathlib.Path(bpe_folder, name).read_bytes())
  (tmp_path / "both" / "vocab.txt").write_bytes(pathlib.Path(vocab_path).read_bytes())
  cases = [
      (dict(vocab_path=str(tmp_path / "vocab.bin")), "", ValueError, "not a vocabulary"),
      (dict(vocab_path=str(tmp_path / "nope.txt")), "", FileNotFoundError, "not found"),
      (dict(vocab_path=str(tmp_path / "empty")), "", FileNotFoundError, "no tokenizer in"),
      (dict(), str(tmp_path / "empty"), FileNotFoundError, "set config.data.vocab_path"),
      (dict(vocab_path=str(tmp_path / "both")), "", ValueError,
       r"WordPiece \(vocab.txt\) and byte-level BPE"),
      (dict(), "", ValueError, "no config.init_from"),
  ]
  for fields, model_dir, error, pattern in cases:
    with pytest.raises(error, match=pattern) as raised:
      tokenizers.make_tokenizer(_data_config(**fields), model_dir=model_dir)
    assert "\n" not in str(raised.value)


def test_vocab_fingerprint(bpe_folder, vocab_path, tmp_path):
  import hashlib  # pylint: disable=g-import-not-at-top
  assert tokenizers.vocab_fingerprint(_data_config(vocab_path=vocab_path)) == (
      hashlib.sha256(pathlib.Path(vocab_path).read_bytes()).hexdigest())
  by_folder = tokenizers.vocab_fingerprint(_data_config(vocab_path=bpe_folder))
  by_json = tokenizers.vocab_fingerprint(
      _data_config(vocab_path=os.path.join(bpe_folder, "vocab.json")))
  assert len({by_folder, by_json}) == 2  # The folder's also covers tokenizer_config.json.
  copy = tmp_path / "copy"
  bpe.BPETokenizer.from_pretrained_dir(bpe_folder).save(str(copy))
  assert tokenizers.vocab_fingerprint(_data_config(vocab_path=str(copy))) == by_folder
  # The tokenizer beside init_from (vocab_path empty, as configs/continued.py's models'):
  # its source keys the cache (before, "vocab_path is empty" failed the pretraining cache).
  beside = tokenizers.make_tokenizer(_data_config(vocab_path=""), model_dir=bpe_folder)
  assert tokenizers.vocab_fingerprint(_data_config(vocab_path=""), beside) == by_folder
  (copy / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
  assert tokenizers.vocab_fingerprint(_data_config(vocab_path=str(copy))) != by_folder
