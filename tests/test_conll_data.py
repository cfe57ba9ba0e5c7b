"""CoNLL-2003 reader, first-sub-token features, word-level scoring and bad input."""
import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_jax.finetune import metrics
from bert_jax.finetune import conll_reader as conll
from bert_jax.finetune.sources import DataFormatError



@pytest.fixture(scope="module")
def valid(data_dir):
  return conll.read_examples("conll2003/valid.txt", data_dir=data_dir)


def test_valid_file_matches_published_statistics(valid):
  assert len(valid) == 3250
  assert sum(len(s.words) for s in valid) == 51362
  entities = collections.Counter(
      type_ for s in valid for type_, _, _ in metrics.get_entities(list(s.tags)))
  assert entities == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
  assert valid[0].words == ("CRICKET", "-", "LEICESTERSHIRE", "TAKE", "OVER", "AT",
                            "TOP", "AFTER", "INNINGS", "VICTORY", ".")
  assert valid[0].provenance.endswith("valid.txt:3")  # After -DOCSTART- and a blank.


def test_load_split_defaults_to_the_standard_files(data_dir, tokenizer):
  features, metadata = conll.load_split({"data_dir": data_dir}, "test", tokenizer, 64)
  assert len(metadata.sentences) == 3453 == features["input_ids"].shape[0]
  assert sum(len(s.words) for s in metadata.sentences) == 46435


def test_features_label_first_sub_tokens(valid, tokenizer):
  sentences = valid[:200]
  features = conll.featurize(sentences, tokenizer, max_seq_length=128)
  assert {k: (v.shape, v.dtype) for k, v in features.items()} == {
      "input_ids": ((200, 128), np.int32), "token_type_ids": ((200, 128), np.int32),
      "attention_mask": ((200, 128), np.int32), "labels": ((200, 128), np.int32),
      "label_weights": ((200, 128), np.float32), "word_index": ((200, 128), np.int32),
      "example_index": ((200,), np.int32)}
  joined = tokenizer.encode([" ".join(s.words) for s in sentences])
  for row, sentence in enumerate(sentences):
    length = features["attention_mask"][row].sum()
    ids = features["input_ids"][row, :length]
    assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
    # Words tokenized one by one give the pieces of the whole sentence.
    assert list(ids[1:-1]) == joined[row][:126]
    first = np.flatnonzero(features["word_index"][row] >= 0)
    np.testing.assert_array_equal(features["word_index"][row, first],
                                  np.arange(len(first)))
    assert len(first) == len(sentence.words)  # No sentence here is cut at 128.
    np.testing.assert_array_equal(features["labels"][row, first],
                                  [conll.LABEL_IDS[t] for t in sentence.tags])
    np.testing.assert_array_equal(np.flatnonzero(features["label_weights"][row]), first)
    assert not features["labels"][row][features["word_index"][row] < 0].any()
    for token, word in zip(first, sentence.words):  # A first piece starts its word.
      piece = tokenizer.vocab[ids[token]]
      assert not piece.startswith("##")
      assert word.lower().startswith(piece) or piece == "[UNK]"


def _gold_logits(features):
  logits = np.zeros(features["labels"].shape + (len(conll.LABELS),), np.float32)
  np.put_along_axis(logits, features["labels"][..., None], 1.0, axis=-1)
  return logits


def test_gold_predictions_score_perfectly_and_cut_words_are_counted(valid, tokenizer):
  sentences = valid[:300]
  features = conll.featurize(sentences, tokenizer, 128)
  metadata = conll.TaggingMetadata(sentences, features["word_index"])
  result = conll.score(_gold_logits(features), metadata)
  assert (result["f1"], result["precision"], result["recall"]) == (1.0, 1.0, 1.0)
  assert result["cut_words"] == 0
  short = conll.featurize(sentences, tokenizer, 12)
  metadata = conll.TaggingMetadata(sentences, short["word_index"])
  tags, cut = conll.word_tags(short["labels"], short["word_index"], sentences)
  kept = (short["word_index"] >= 0).sum()
  assert cut == sum(len(s.words) for s in sentences) - kept > 0
  result = conll.score(_gold_logits(short), metadata)
  assert result["cut_words"] == cut
  cut_gold = [[t if (row >= 0).sum() > i else "O" for i, t in enumerate(s.tags)]
              for s, row in zip(sentences, short["word_index"])]
  assert tags == cut_gold  # Gold tags on the kept words, "O" on the cut ones.
  expected = metrics.entity_scores([s.tags for s in sentences], cut_gold)
  assert result["f1"] == expected["f1"] < 1.0


def test_tfds_conll2003_maps_class_names():
  record = {"tokens": ["EU", "rejects", "German"], "pos": [22, 42, 16],
            "chunks": [11, 21, 11], "ner": [3, 0, 7]}

  def as_dataset(self, split, **unused_kwargs):
    assert split == "dev"
    spec = self.info.features.get_tensor_spec()
    return tf.data.Dataset.from_generator(lambda: iter([record]), output_signature=spec)

  with tfds.testing.mock_data(as_dataset_fn=as_dataset):
    tagged = {column: conll.read_examples("tfds:conll2003", "dev", column=column)[0]
              for column in conll.COLUMNS}
  assert tagged["ner"].words == ("EU", "rejects", "German")
  assert tagged["ner"].tags == ("B-ORG", "O", "B-MISC")
  # The first sentence of train.txt: `EU NNP B-NP B-ORG`, `rejects VBZ B-VP O`, ...
  assert tagged["pos"].tags == ("NNP", "VBZ", "JJ")
  assert tagged["chunk"].tags == ("B-NP", "B-VP", "B-NP")
  features = tfds.builder("conll2003").info.features
  for column in conll.COLUMNS.values():  # our class ids are tfds's (and HF's)
    assert column.labels == tuple(features[column.tfds_feature].feature.names)


def test_pos_and_chunk_columns(data_dir, tokenizer):
  """The POS and chunk columns of valid.txt, their ids at first sub-tokens, and their
  scores: token accuracy (a cut word is an error) and conlleval chunk F1."""
  pos = conll.read_examples("conll2003/valid.txt", data_dir=data_dir, column="pos")
  chunk = conll.read_examples("conll2003/valid.txt", data_dir=data_dir, column="chunk")
  assert len(pos) == len(chunk) == 3250
  assert pos[0].tags[:5] == ("NNP", ":", "NNP", "NNP", "IN")
  assert chunk[0].tags[:5] == ("B-NP", "O", "B-NP", "I-NP", "B-PP")
  chunks = collections.Counter(
      type_ for s in chunk for type_, _, _ in metrics.get_entities(list(s.tags)))
  # Each chunk starts at a B- tag (IOB2): the counts of B-NP, B-PP and B-VP in the file.
  assert chunks.most_common(3) == [("NP", 14644), ("PP", 4884), ("VP", 4696)]
  for column, sentences in (("pos", pos[:300]), ("chunk", chunk[:300])):
    features = conll.featurize(sentences, tokenizer, 128, column)
    ids = conll.COLUMNS[column].label_ids
    first = features["label_weights"] > 0
    assert [ids[t] for s in sentences for t in s.tags] == list(features["labels"][first])
    logits = np.eye(len(conll.COLUMNS[column].labels), dtype=np.float32)[features["labels"]]
    result = conll.score(logits, conll.TaggingMetadata(sentences, features["word_index"],
                                                       column))
    assert result[{"pos": "accuracy", "chunk": "f1"}[column]] == 1.0
    assert result["cut_words"] == 0
  short = conll.featurize(pos[:300], tokenizer, 12, "pos")
  logits = np.eye(len(conll.POS_LABELS), dtype=np.float32)[short["labels"]]
  result = conll.score(logits, conll.TaggingMetadata(pos[:300], short["word_index"], "pos"))
  words = sum(len(s.words) for s in pos[:300])
  assert result["accuracy"] == (words - result["cut_words"]) / words < 1.0


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_bad_input_names_file_and_line(tmp_path):
  good = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\n"
  with pytest.raises(DataFormatError, match=r"tag\.txt:4: NER tag 'B-FOO'"):
    conll.read_examples(_write(tmp_path, "tag.txt", good + "x NN I-NP B-FOO\n"))
  with pytest.raises(DataFormatError, match=r"cols\.txt:4: expected 4"):
    conll.read_examples(_write(tmp_path, "cols.txt", good + "x NN B-ORG\n"))
  with pytest.raises(DataFormatError, match=r"empty\.txt:1: the file is empty"):
    conll.read_examples(_write(tmp_path, "empty.txt", ""))
  with pytest.raises(DataFormatError, match=r"docs\.txt:1: no sentences"):
    conll.read_examples(_write(tmp_path, "docs.txt", "-DOCSTART- -X- -X- O\n\n"))
  (sentence,) = conll.read_examples(_write(tmp_path, "ok.txt", good))
  assert sentence.tags == ("B-ORG",)
  with pytest.raises(DataFormatError, match=r"pos\.txt:4: POS tag 'XX' is not one of"):
    conll.read_examples(_write(tmp_path, "pos.txt", good + "x XX I-NP O\n"), column="pos")
  with pytest.raises(ValueError, match=r"config.data.column='lemma': expected one of "
                     r"\['chunk', 'ner', 'pos'\]"):
    conll.read_examples(_write(tmp_path, "ok.txt", good), column="lemma")
  with pytest.raises(ValueError, match="Expected logits"):
    conll.score(np.zeros((1, 4, 3)), conll.TaggingMetadata([sentence], np.zeros((1, 4))))
