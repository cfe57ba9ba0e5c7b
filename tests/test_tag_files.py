"""Tagging the user's own CoNLL-format files (configs/tag.py, finetune/tag.py): CoNLL-2003
sentences of the data root written as `word tag` files with renamed entity types, trained a
few steps from a random L2/H32 encoder; the IOB2 checks name file:line.
"""
import json
import os

import pytest

from bert_jax.finetune import metrics, tag
from bert_jax.finetune.sources import DataFormatError
from bert_jax.run import trainer
from configs import tag as tag_config


RENAMED = {"PER": "PERSON", "ORG": "COMPANY", "LOC": "PLACE", "MISC": "OTHER"}


def _conll_sentences(data_dir, count):
  """The first `count` sentences of CoNLL-2003's train.txt: [(word, NER tag)]."""
  sentences, words = [], []
  with open(os.path.join(data_dir, "conll2003", "train.txt"), encoding="utf-8") as f:
    for line in f:
      fields = line.split()
      if fields and fields[0] != "-DOCSTART-":
        words.append((fields[0], fields[3]))
      elif words:
        sentences.append(words)
        words = []
      if len(sentences) == count:
        break
  return sentences


def _renamed(tag_name):
  return tag_name if tag_name == "O" else f"{tag_name[:2]}{RENAMED[tag_name[2:]]}"


def _write(path, sentences):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join("".join(" ".join(fields) + "\n" for fields in s) + "\n"
                    for s in sentences))
  return str(path)


def test_bio_is_checked_with_file_and_line(tmp_path):
  column = tag.user_column(-1)
  path = _write(tmp_path / "x.txt", [[("Peter", "B-PER"), ("Blackburn", "I-PER")],
                                     [("in", "O"), ("Paris", "I-LOC")]])
  with pytest.raises(DataFormatError, match=r"x.txt:5: tag 'I-LOC' follows 'O'; an entity "
                                            r"starts with B-LOC"):
    tag.read(path, column)
  path = _write(tmp_path / "y.txt", [[("Peter", "PER")]])
  with pytest.raises(DataFormatError, match=r"y.txt:1: tag 'PER' is not BIO"):
    tag.read(path, column)
  path = _write(tmp_path / "z.txt", [[("Peter",)]])
  with pytest.raises(DataFormatError, match=r"z.txt:1: 1 space-separated columns, no tag"):
    tag.read(path, column)
  with pytest.raises(FileNotFoundError, match="not the data root"):
    tag.read(str(tmp_path / "missing.txt"), column)


def test_the_classes_are_the_training_tags_in_order():
  assert tag.tag_order(["I-PER", "B-LOC", "B-PER", "I-LOC"]) == (
      "O", "B-LOC", "I-LOC", "B-PER", "I-PER")


def test_own_tag_set_trains_scores_spans_and_predicts(tmp_path, data_dir,
                                                      small_bert):  # noqa: F811
  sentences = [[(w, _renamed(t)) for w, t in s] for s in _conll_sentences(data_dir, 80)]
  train = _write(tmp_path / "train.txt", sentences[:64])
  dev = _write(tmp_path / "dev.txt", sentences[64:])
  config = tag_config.get_config(f"train={train},dev={dev},runlocal=True")
  config.init_from = small_bert
  config.predict = True
  trainer.train_and_evaluate(config, str(tmp_path / "run"))
  with open(tmp_path / "run" / "eval_results.json") as f:
    results = json.load(f)
  with open(tmp_path / "run" / "model_config.json") as f:
    labels = json.load(f)["labels"]
  assert labels == list(tag.tag_order(t for s in sentences[:64] for _, t in s))
  assert {"B-PERSON", "I-COMPANY", "B-PLACE"} <= set(labels)
  with open(tmp_path / "run" / tag.PREDICTIONS_FILE) as f:
    rows = [line.split() for line in f.read().split("\n\n")[0].splitlines()]
  assert [(w, g) for w, g, _ in rows] == sentences[64]
  # eval_f1 is seqeval's span F1 of the written predictions.
  with open(tmp_path / "run" / tag.PREDICTIONS_FILE) as f:
    blocks = [[line.split() for line in b.splitlines()] for b in f.read().split("\n\n") if b]
  expected = metrics.entity_scores([[g for _, g, _ in b] for b in blocks],
                                   [[p for _, _, p in b] for b in blocks])
  assert results["eval_f1"] == pytest.approx(expected["f1"])
  # A dev tag the training file lacks names its line.
  _write(tmp_path / "dev.txt", [[("Zurich", "B-CITY")]])
  with pytest.raises(DataFormatError, match=r"dev.txt:1: the tag 'B-CITY' is not one of"):
    trainer.train_and_evaluate(config, str(tmp_path / "run2"))
