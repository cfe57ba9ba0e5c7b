"""SWAG CSV reader, [N, 4, T] features, accuracy and bad input."""
import os
import zipfile

import numpy as np
import pytest

from bert_jax.finetune import swag_reader as swag
from bert_jax.finetune.sources import DataFormatError



@pytest.fixture(scope="module")
def examples(data_dir):
  return swag.read_examples("swag/swag.csv", data_dir=data_dir)


def test_reads_the_fixture(examples):
  assert len(examples) == 11
  first = examples[0]
  assert first.context == "Students lower their eyes nervously."
  assert first.start_of_ending == "She"
  assert first.endings[0] == "pats her shoulder, then saunters toward someone."  # Quoted.
  assert first.label == 2 and len(first.endings) == swag.NUM_CHOICES
  assert first.provenance.endswith("swag.csv:2")


def test_unlabeled_test_csv_without_final_newline(data_dir, tmp_path):
  archive = os.path.join(data_dir, "swag", "hf_dummy", "regular", "dummy_data.zip")
  with zipfile.ZipFile(archive) as z:
    for name in ("test.csv", "val.csv"):
      (tmp_path / name).write_bytes(z.read(f"dummy_data/{name}"))
  test = swag.read_examples(str(tmp_path / "test.csv"), "test")
  assert len(test) == 4 and all(e.label is None for e in test)
  assert test[0].start_of_ending == "Then, the person"
  val = swag.read_examples(str(tmp_path / "val.csv"), "dev")
  fixture = swag.read_examples("swag/swag.csv", data_dir=data_dir)
  assert [(e.context, e.endings, e.label) for e in val] == [
      (e.context, e.endings, e.label) for e in fixture[:4]]


def test_featurize_and_score(examples, tokenizer):
  features = swag.featurize(examples, tokenizer, max_seq_length=48)
  assert {k: (v.shape, v.dtype) for k, v in features.items()} == {
      "input_ids": ((11, 4, 48), np.int32), "token_type_ids": ((11, 4, 48), np.int32),
      "attention_mask": ((11, 4, 48), np.int32), "label": ((11,), np.int32),
      "example_index": ((11,), np.int32)}
  first = examples[0]
  expected = tokenizer.encode_for_model(
      [first.context] * 4, [f"{first.start_of_ending} {e}" for e in first.endings], 48)
  np.testing.assert_array_equal(features["input_ids"][0], expected["input_ids"])
  np.testing.assert_array_equal(features["token_type_ids"][0], expected["token_type_ids"])
  logits = np.eye(4)[features["label"]]
  assert swag.score(logits, examples) == {"accuracy": 1.0}
  assert swag.score(np.roll(logits, 1, axis=1), examples) == {"accuracy": 0.0}


def test_load_split(data_dir, tokenizer):
  config = {"data_dir": data_dir, "sources": {"dev": "swag/swag.csv"}}
  features, examples = swag.load_split(config, "dev", tokenizer, 32)
  assert features["input_ids"].shape == (len(examples), 4, 32)
  with pytest.raises(ValueError, match="No source for split 'train'"):
    swag.load_split(config, "train", tokenizer, 32)


HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
          "ending0,ending1,ending2,ending3,label\n")
ROW = '0,v,1,"A b. He",A b.,He,gold,"runs, fast.",sits.,eats.,sleeps.,{label}\n'


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_bad_input(tmp_path):
  good = swag.read_examples(_write(tmp_path, "ok.csv", HEADER + ROW.format(label=1)))
  assert good[0].endings[0] == "runs, fast." and good[0].label == 1
  with pytest.raises(DataFormatError, match=r"label\.csv:3: label '4'"):
    swag.read_examples(_write(tmp_path, "label.csv",
                              HEADER + ROW.format(label=0) + ROW.format(label=4)))
  with pytest.raises(DataFormatError, match=r"short\.csv:2: expected 12"):
    swag.read_examples(_write(tmp_path, "short.csv", HEADER + "0,v,1,x,y\n"))
  with pytest.raises(DataFormatError, match=r"cols\.csv:1: the header has no column"):
    swag.read_examples(_write(tmp_path, "cols.csv", "a,b\n1,2\n"))
  with pytest.raises(DataFormatError, match=r"empty\.csv:1: the file is empty"):
    swag.read_examples(_write(tmp_path, "empty.csv", ""))
  with pytest.raises(ValueError, match="tfds has no SWAG"):
    swag.read_examples("tfds:swag")
