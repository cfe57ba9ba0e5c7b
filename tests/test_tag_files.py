"""Tagging the user's own CoNLL-format files (configs/tag.py, finetune/tag.py): CoNLL-2003
sentences of the data root written as `word tag` files with renamed entity types (in IOB2,
IOB1 and IOBES), trained a few steps from a random L2/H32 encoder and predicting a test file;
the schemes' checks name file:line, bad sentences skipped when asked are counted.
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
  with pytest.raises(DataFormatError, match=r"y.txt:1: tag 'PER' is not IOB2 \(O, B-TYPE, "
                                            r"I-TYPE\); other tag schemes: scheme=iob1"):
    tag.read(path, column)
  path = _write(tmp_path / "z.txt", [[("Peter",)]])
  with pytest.raises(DataFormatError, match=r"z.txt:1: 1 space-separated columns, no tag"):
    tag.read(path, column)
  with pytest.raises(FileNotFoundError, match="not the data root"):
    tag.read(str(tmp_path / "missing.txt"), column)


def _in_scheme(tags, scheme):
  """IOB2 tags rewritten in `scheme` (the same entities)."""
  out = []
  for i, t in enumerate(tags):
    after = tags[i + 1] if i + 1 < len(tags) else "O"
    before = tags[i - 1] if i else "O"
    ends = after != f"I-{t[2:]}"
    if t == "O" or scheme == "iob2":
      out.append(t)
    elif scheme == "iob1":  # B- only right after an entity of the same type
      out.append(t if t[0] == "B" and before[2:] == t[2:] else f"I-{t[2:]}")
    else:  # iobes
      out.append({("B", True): "S", ("B", False): "B", ("I", True): "E",
                  ("I", False): "I"}[t[0], ends] + t[1:])
  return out


@pytest.mark.parametrize("scheme", ["iob1", "iobes", "bioes"])
def test_iob1_and_iobes_files_read_and_score_the_same_entities(tmp_path, data_dir, scheme):
  sentences = _conll_sentences(data_dir, 40)
  converted = [list(zip([w for w, _ in s], _in_scheme([t for _, t in s], scheme)))
               for s in sentences]
  assert converted != sentences
  read = tag.read(_write(tmp_path / "x.txt", converted), tag.user_column(-1, scheme=scheme))
  assert [list(zip(s.words, s.tags)) for s in read] == converted
  # seqeval's default mode (conlleval's chunks) reads each scheme's tags as the same entities.
  for sentence, tags in zip(sentences, (s.tags for s in read)):
    assert metrics.get_entities(tags) == metrics.get_entities([t for _, t in sentence])
  gold = [[t for _, t in s] for s in sentences]
  assert metrics.entity_scores(gold, [list(s.tags) for s in read])["f1"] == 1.0


@pytest.mark.parametrize("scheme,tags,message", [
    ("iob1", ["O", "B-LOC"], r"x.txt:2: tag 'B-LOC' follows 'O'; an entity starts with I-LOC "
                             r"\(IOB1: B-LOC only right after another LOC\)"),
    ("iob1", ["I-PER", "B-LOC"], r"x.txt:2: tag 'B-LOC' follows 'I-PER'"),
    ("iobes", ["O", "I-LOC"], r"x.txt:2: tag 'I-LOC' follows 'O'; an entity starts with B-LOC"),
    ("iobes", ["B-LOC", "O"], r"x.txt:2: tag 'O' follows 'B-LOC', whose entity ends with E-LOC"),
    ("iobes", ["B-LOC", "I-LOC"], r"x.txt:2: the sentence ends inside a LOC entity"),
    ("iobes", ["S-LOC", "E-LOC"], r"x.txt:2: tag 'E-LOC' follows 'S-LOC'"),
    ("iobes", ["B-LOC", "E-PER"], r"x.txt:2: tag 'E-PER' follows 'B-LOC'"),
    ("iob2", ["S-LOC"], r"x.txt:1: tag 'S-LOC' is not IOB2 .*scheme=iobes"),
])
def test_an_invalid_sequence_names_its_line(tmp_path, scheme, tags, message):
  path = _write(tmp_path / "x.txt", [[(f"w{i}", t) for i, t in enumerate(tags)]])
  with pytest.raises(DataFormatError, match=message):
    tag.read(path, tag.user_column(-1, scheme=scheme))
  with pytest.raises(ValueError, match=r"config.data.scheme='bilou': expected one of"):
    tag.user_column(-1, scheme="bilou")


def test_bad_sentences_are_skipped_and_counted_when_asked(tmp_path, capsys):
  good = [("Peter", "B-PER"), ("Blackburn", "I-PER")]
  path = _write(tmp_path / "x.txt", [good, [("in", "O"), ("Paris", "I-LOC")],
                                     [("one",), ("two", "O")], good])
  with pytest.raises(DataFormatError, match=r"x.txt:5: tag 'I-LOC' follows 'O'.*"
                                            r"skip_bad_rows=true skips such sentences"):
    tag.read(path, tag.user_column(-1))
  assert [s.provenance.rsplit(":", 1)[1] for s in tag.read(path, tag.user_column(-1), True)] == [
      "1", "10"]
  assert capsys.readouterr().out.splitlines() == [
      f"{path}: skipped 2 bad sentences of 4 (skip_bad_rows); the first: {path}:5: tag "
      "'I-LOC' follows 'O'; an entity starts with B-LOC (IOB2)"]
  # A file to predict: the words alone, or a line's other fields unread.
  path = _write(tmp_path / "t.txt", [[("one",), ("two", "X", "junk")]])
  assert [s.words for s in tag.read(path, tag.WORDS)] == [("one", "two")]


def test_the_classes_are_the_training_tags_in_order():
  assert tag.tag_order(["I-PER", "B-LOC", "B-PER", "I-LOC"]) == (
      "O", "B-LOC", "I-LOC", "B-PER", "I-PER")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["iob2", "iobes"])
def test_own_tag_set_trains_scores_spans_and_predicts(tmp_path, data_dir, scheme,
                                                      small_bert):  # noqa: F811
  sentences = [list(zip([w for w, _ in s], _in_scheme([_renamed(t) for _, t in s], scheme)))
               for s in _conll_sentences(data_dir, 92)]
  train = _write(tmp_path / "train.txt", sentences[:64])
  dev = _write(tmp_path / "dev.txt", sentences[64:80])
  test = _write(tmp_path / "test.txt", [[(w,) for w, _ in s] for s in sentences[80:]])
  arg = f"train={train},dev={dev},scheme={scheme},runlocal=True"
  config = tag_config.get_config(arg)
  config.init_from = small_bert
  config.predict = True
  trainer.train_and_evaluate(config, str(tmp_path / "run"))
  with open(tmp_path / "run" / "eval_results.json") as f:
    results = json.load(f)
  with open(tmp_path / "run" / "model_config.json") as f:
    labels = json.load(f)["labels"]
  assert labels == list(tag.tag_order(t for s in sentences[:64] for _, t in s))
  assert {"I-COMPANY", "B-PLACE"} <= set(labels)
  assert ("S-PERSON" in labels) == (scheme == "iobes")
  with open(tmp_path / "run" / tag.PREDICTIONS_FILE) as f:
    rows = [line.split() for line in f.read().split("\n\n")[0].splitlines()]
  assert [(w, g) for w, g, _ in rows] == sentences[64]
  # eval_f1 is seqeval's span F1 of the written predictions.
  with open(tmp_path / "run" / tag.PREDICTIONS_FILE) as f:
    blocks = [[line.split() for line in b.splitlines()] for b in f.read().split("\n\n") if b]
  expected = metrics.entity_scores([[g for _, g, _ in b] for b in blocks],
                                   [[p for _, _, p in b] for b in blocks])
  assert results["eval_f1"] == pytest.approx(expected["f1"])
  # The finished run predicts a file of words: its sentences in order, the training tags.
  config = tag_config.get_config(f"{arg},test={test}")
  config.init_from = small_bert
  config.predict = True
  trainer.train_and_evaluate(config, str(tmp_path / "run"))
  with open(tmp_path / "run" / "predictions_test.txt") as f:
    blocks = [[line.split() for line in b.splitlines()] for b in f.read().split("\n\n") if b]
  assert [[w for w, _ in b] for b in blocks] == [[w for w, _ in s] for s in sentences[80:]]
  assert {t for b in blocks for _, t in b} <= set(labels)
  # A dev tag the training file lacks names its line.
  _write(tmp_path / "dev.txt", [[("Zurich", "B-CITY")]])
  with pytest.raises(DataFormatError, match=r"dev.txt:1: the tag 'B-CITY' is not one of"):
    trainer.train_and_evaluate(config, str(tmp_path / "run2"))
