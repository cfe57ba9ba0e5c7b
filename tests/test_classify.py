"""Fine-tuning on the user's own files (configs/classify.py, finetune/classify.py and
finetune/classify_reader.py): real sentences of the data root (SST-2, MNLI, STS-B rows)
written as CSV, TSV and JSON lines with string labels, trained a few steps from a random
L2/H32 encoder, exported to HF, predicted; the readers' formats and bad rows checked
against Python's csv and json.
"""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import bert_jax
from bert_jax.finetune import base, classify, classify_reader
from bert_jax.finetune.sources import DataFormatError
from bert_jax.run import trainer
from bert_jax.text.tokenizers import make_tokenizer
from configs import classify as classify_config
from tests.helpers.runs import REPO
from tests.helpers.tfds_mock import mock_tfds

SENTIMENT = ("negative", "positive")


def _glue_rows(data_dir, path, count, skip=0):
  """The first `count` data rows (after `skip`) of a GLUE TSV, as dicts by header name."""
  with open(os.path.join(data_dir, "glue", path), encoding="utf-8-sig") as f:
    lines = f.read().splitlines()
  header = lines[0].split("\t")
  return [dict(zip(header, line.split("\t"))) for line in lines[1 + skip:1 + skip + count]]


def _sst2(data_dir, count, skip=0):
  """(sentence, 'negative'|'positive') of SST-2's training rows."""
  return [(r["sentence"].strip(), SENTIMENT[int(r["label"])])
          for r in _glue_rows(data_dir, "SST-2/train.tsv", count, skip)]


def _write_csv(path, header, rows, delimiter=","):
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
  return str(path)


def _write_jsonl(path, records):
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
  return str(path)


def _columns(**fields):
  return classify_reader.Columns.of({"text": "sentence", "label": "label", **fields})


def _read(path, **fields):
  return classify_reader.read_labelled(str(path), _columns(**fields), "", None)


def _config(arg, small_bert):  # noqa: F811
  config = classify_config.get_config(arg + ",runlocal=True")
  config.init_from = small_bert
  return config


def _train(config, workdir):
  trainer.train_and_evaluate(config, str(workdir))
  with open(os.path.join(workdir, "eval_results.json")) as f:
    return json.load(f)


# ------------------------------------------------------------------------------------
# Reading (no model).
# ------------------------------------------------------------------------------------
def test_csv_quoting_is_pythons_and_labels_are_sorted(tmp_path):
  rows = [["a, quoted \"one\"", "b"], ["two\nlines", "a"], ["plain", "c"]]
  path = _write_csv(tmp_path / "x.csv", ["sentence", "label"], rows)
  problem, labels, examples = _read(path)
  assert (problem, labels) == ("single_label", ("a", "b", "c"))
  assert [(e.text_a, e.label) for e in examples] == [tuple(r) for r in rows]
  # A row's line is the one it starts on (the second row's text spans lines 3-4).
  assert [e.provenance.rsplit(":", 1)[1] for e in examples] == ["2", "3", "5"]
  # Hand-written CSV reads as Python's csv module reads it (quotes inside an unquoted field
  # kept, doubled quotes inside a quoted one, CRLF line ends).
  raw = ('sentence,label\r\n"say ""hi"", then go",x\r\nits "inner" quotes,y\r\n'
         '"multi\nline",x\r\n')
  (tmp_path / "raw.csv").write_bytes(raw.encode("utf-8"))
  with open(tmp_path / "raw.csv", newline="", encoding="utf-8") as f:
    expected = [tuple(r) for r in csv.reader(f)][1:]
  assert [(e.text_a, e.label) for e in _read(tmp_path / "raw.csv")[2]] == expected
  assert expected[0][0] == 'say "hi", then go' and expected[1][0] == 'its "inner" quotes'
  # Numeric classes sort as numbers.
  path = _write_csv(tmp_path / "n.csv", ["sentence", "label"],
                    [[f"s{i}", str(v)] for i, v in enumerate([10, 2, 1, 2])])
  assert _read(path)[:2] == ("single_label", ("1", "2", "10"))


def test_the_problem_is_inferred_and_can_be_forced(tmp_path, data_dir):
  stsb = _glue_rows(data_dir, "STS-B/train.tsv", 40)
  path = _write_jsonl(tmp_path / "s.jsonl",
                      [{"sentence": r["sentence1"], "label": float(r["score"])} for r in stsb])
  assert len({r["score"] for r in stsb}) > classify_reader.NUMERIC_CLASSES_MAX
  problem, labels, examples = _read(path)
  assert (problem, labels) == ("regression", None)
  assert [e.label for e in examples] == [float(r["score"]) for r in stsb]
  forced = classify_reader.read_labelled(path, _columns(), "single_label", None)
  assert forced[0] == "single_label" and len(forced[1]) == len({r["score"] for r in stsb})
  # Lists (JSON, or label_sep in a CSV) are multi-label; a lone JSON label is a set of one.
  path = _write_jsonl(tmp_path / "m.jsonl", [{"sentence": "x", "label": ["b", "a"]},
                                             {"sentence": "y", "label": "c"},
                                             {"sentence": "z", "label": []}])
  problem, labels, examples = _read(path)
  assert (problem, labels) == ("multi_label", ("a", "b", "c"))
  assert classify_reader.multi_hot(examples, labels).tolist() == [[1, 1, 0], [0, 0, 1], [0, 0, 0]]
  path = _write_csv(tmp_path / "m.tsv", ["sentence", "label"], [["x", "a|b"], ["y", "b"]], "\t")
  assert _read(path, label_sep="|")[:2] == ("multi_label", ("a", "b"))


@pytest.mark.parametrize("rows,fields,message", [
    ([["fine", "a"], ["short"]], {},
     r"x.csv:3: column 'label' is missing \(1 fields, the header has 2\)"),
    ([["fine", "a"], ["a", "b", "c"]], {}, r"x.csv:3: 3 fields, the header has 2"),
    ([["fine", "a"], ["", ""]], {}, r"x.csv:3: column 'sentence' is empty"),
    ([["fine", "a"], [" ", "a"]], {}, r"x.csv:3: column 'sentence' is empty"),
    ([["fine", "a"], ["text", ""]], {}, r"x.csv:3: column 'label' is empty"),
    ([["fine", "1.5"], ["text", "high"]], {"problem": "regression"},
     r"x.csv:3: column 'label': label 'high' is not a number"),
])
def test_a_bad_row_names_its_file_and_line(tmp_path, rows, fields, message):
  path = _write_csv(tmp_path / "x.csv", ["sentence", "label"], rows)
  problem = fields.pop("problem", "")
  with pytest.raises(DataFormatError, match=message):
    classify_reader.read_labelled(path, _columns(**fields), problem, None)


def test_bad_rows_skipped_are_counted_once(tmp_path, capsys):
  rows = [["good", "a"], ["", "a"], ["fine", "b"], ["also"], ["ok", "b"]]
  path = _write_csv(tmp_path / "x.csv", ["sentence", "label"], rows)
  _, labels, examples = _read(path, skip_bad_rows=True)
  assert [e.text_a for e in examples] == ["good", "fine", "ok"] and labels == ("a", "b")
  out = capsys.readouterr().out.splitlines()
  assert out == [f"{path}: skipped 2 bad rows of 5 (skip_bad_rows); the first: "
                 f"{path}:3: column 'sentence' is empty"]


def test_file_errors(tmp_path):
  path = _write_csv(tmp_path / "x.csv", ["text", "label"], [["a", "b"]])
  with pytest.raises(DataFormatError, match=r"x.csv:1: the header has no column 'sentence'"):
    _read(path)
  with pytest.raises(FileNotFoundError, match="relative paths are read from the current"):
    _read(tmp_path / "missing.csv")
  (tmp_path / "x.txt").write_text("sentence,label\na,b\nc,d\n")
  with pytest.raises(ValueError, match=r"extension '.txt' names no format"):
    _read(tmp_path / "x.txt")
  assert _read(tmp_path / "x.txt", format="csv")[1] == ("b", "d")  # format= names it
  path = _write_jsonl(tmp_path / "j.jsonl", [{"sentence": "a", "label": "b"}])
  with open(path, "a") as f:
    f.write("[1, 2]\n")
  with pytest.raises(DataFormatError, match=r"j.jsonl:2: a JSON list, not an object"):
    _read(path)
  path = _write_csv(tmp_path / "one.csv", ["sentence", "label"], [["a", "yes"], ["b", "yes"]])
  with pytest.raises(DataFormatError, match=r"one.csv: every label is 'yes'; a classifier"):
    _read(path)
  with pytest.raises(ValueError, match=r"train= is required"):
    classify_config.get_config("dev=d.csv,text=t,label=l")


# ------------------------------------------------------------------------------------
# Fine-tuning.
# ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_trains_stores_labels_exports_to_hf_and_predicts(tmp_path, data_dir,
                                                            small_bert):  # noqa: F811
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  rows = _sst2(data_dir, 112)
  _write_csv(tmp_path / "train.csv", ["id", "sentence", "label"],
             [[f"r{i}", t, y] for i, (t, y) in enumerate(rows[:80])])
  _write_csv(tmp_path / "dev.csv", ["sentence", "label"], rows[80:100])
  _write_csv(tmp_path / "test.csv", ["id", "sentence"],
             [[f"t{i}", t] for i, (t, _) in enumerate(rows[100:])])
  command = [sys.executable, "-m", "bert_jax.train", "--workdir=run",
             f"--config={REPO}/configs/classify.py:train=train.csv,dev=dev.csv,test=test.csv,"
             "text=sentence,label=label,runlocal=True", "--config.predict=true",
             f"--config.init_from={small_bert}"]
  env = {**os.environ, "PYTHONPATH": REPO}
  done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                        timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "eval_accuracy" in done.stdout and "eval_macro_f1" in done.stdout, done.stdout
  workdir = str(tmp_path / "run")
  with open(os.path.join(workdir, "model_config.json")) as f:
    assert json.load(f)["labels"] == list(SENTIMENT)
  # The predictions: the test file's ids, label names, argmax of the reloaded classifier.
  with open(os.path.join(workdir, "predictions_test.csv"), newline="") as f:
    predicted = list(csv.reader(f))
  assert predicted[0] == ["id", "prediction"]
  assert [r[0] for r in predicted[1:]] == [f"t{i}" for i in range(12)]
  model, variables = bert_jax.load_pretrained(workdir)
  tokenizer = make_tokenizer(classify_config.get_config(
      "train=a.csv,dev=b.csv,text=t,label=l").data, model_dir=workdir)
  features = tokenizer.encode_for_model([t for t, _ in rows[100:]], max_length=32)
  logits = np.asarray(model.apply(variables, *(features[k] for k in base.MODEL_INPUTS)).logits)
  assert [r[1] for r in predicted[1:]] == [SENTIMENT[i] for i in logits.argmax(-1)]
  # HF's export: id2label / label2id, and HF's classifier gives the same logits.
  from bert_jax.commands.convert import convert
  convert(workdir, str(tmp_path / "hf"), to="hf")
  theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
      str(tmp_path / "hf")).eval()
  assert theirs.config.id2label == {0: "negative", 1: "positive"}
  assert theirs.config.label2id == {"negative": 0, "positive": 1}
  assert theirs.config.problem_type == "single_label_classification"
  with torch.no_grad():
    hf_logits = theirs(**{k: torch.tensor(np.asarray(features[k]), dtype=torch.long)
                          for k in base.MODEL_INPUTS}).logits.numpy()
  np.testing.assert_allclose(hf_logits, logits, atol=1e-4)


@pytest.mark.slow
def test_cli_bad_row_is_one_line_with_file_and_line(tmp_path, data_dir, small_bert):  # noqa: F811
  rows = _sst2(data_dir, 20)
  _write_csv(tmp_path / "train.csv", ["sentence", "label"], rows[:16])
  _write_csv(tmp_path / "dev.csv", ["sentence", "label"],
             [rows[16], (rows[17][0], "neutral"), *rows[18:]])
  command = [sys.executable, "-m", "bert_jax.train", "--workdir=run",
             f"--config={REPO}/configs/classify.py:train=train.csv,dev=dev.csv,"
             "text=sentence,label=label,runlocal=True", f"--config.init_from={small_bert}"]
  done = subprocess.run(command, cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO},
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 1, done.stderr[-2000:]
  dev = os.path.join(str(tmp_path), "dev.csv")
  assert done.stderr.strip().splitlines()[-1] == (
      f"bert_jax.train: error: {dev}:3: column 'label': label 'neutral' is not one of the "
      "training file's ['negative', 'positive'] (config.data.skip_bad_rows=true skips such "
      "rows)")


def test_text_pairs_from_tsv(tmp_path, data_dir, small_bert):  # noqa: F811
  header = ["premise", "hypothesis", "label"]
  rows = {split: [[r["sentence1"], r["sentence2"], r["gold_label"]]
                  for r in _glue_rows(data_dir, f"MNLI/k-shot/16-100/{split}.tsv", 48)]
          for split in ("train", "dev_matched")}
  train = _write_csv(tmp_path / "train.tsv", header, rows["train"], "\t")
  dev = _write_csv(tmp_path / "dev.tsv", header, rows["dev_matched"][:24], "\t")
  config_arg = f"train={train},dev={dev},text=premise,text_pair=hypothesis,label=label"
  config = _config(config_arg, small_bert)
  results = _train(config, tmp_path / "run")
  assert 0.0 <= results["eval_accuracy"] <= 1.0 and "eval_macro_f1" in results
  with open(tmp_path / "run" / "model_config.json") as f:
    assert json.load(f)["labels"] == ["contradiction", "entailment", "neutral"]
  # Both texts reached the model: [SEP] a [SEP] b [SEP] with segment 1.
  task = classify.ClassifyTask(config, trainer.resolve_model_config(config))
  features, _ = task.load_split("dev", make_tokenizer(config.data, model_dir=small_bert))
  assert (features["token_type_ids"].sum(-1) > 1).all()
  # The workdir keeps its classes: a rerun whose training file names others is refused.
  for path, split in ((train, "train"), (dev, "dev_matched")):
    _write_csv(path, header, [r[:2] + [r[2].replace("neutral", "unsure")] for r in rows[split]],
               "\t")
  with pytest.raises(ValueError, match=r"labels \['contradiction', 'entailment', 'neutral'\] "
                                       r"-> \['contradiction', 'entailment', 'unsure'\]"):
    trainer.train_and_evaluate(_config(config_arg, small_bert), str(tmp_path / "run"))


def test_regression_from_json_lines_with_dev_predictions(tmp_path, data_dir,
                                                         small_bert):  # noqa: F811
  stsb = [{"s1": r["sentence1"], "s2": r["sentence2"], "score": float(r["score"]),
           "id": int(r["index"])} for r in _glue_rows(data_dir, "STS-B/train.tsv", 88)]
  train = _write_jsonl(tmp_path / "train.jsonl", stsb[:64])
  dev = _write_jsonl(tmp_path / "dev.jsonl", stsb[64:])
  config = _config(f"train={train},dev={dev},text=s1,text_pair=s2,label=score", small_bert)
  config.predict = True
  results = _train(config, tmp_path / "run")
  assert {"eval_pearson", "eval_spearman"} <= set(results)
  with open(tmp_path / "run" / "predictions_dev.jsonl") as f:
    predicted = [json.loads(line) for line in f]
  assert [p["id"] for p in predicted] == [str(r["id"]) for r in stsb[64:]]
  assert all(isinstance(p["prediction"], float) for p in predicted)


def test_multi_label_with_label_sep(tmp_path, data_dir, small_bert):  # noqa: F811
  # Two labels a sentence can have together: its sentiment, and "long" past 8 words.
  rows = [(t, "|".join([y] + ["long"] * (len(t.split()) > 8))) for t, y in _sst2(data_dir, 96)]
  train = _write_csv(tmp_path / "train.csv", ["sentence", "tags"], rows[:64])
  dev = _write_csv(tmp_path / "dev.csv", ["sentence", "tags"], rows[64:])
  config = _config(f"train={train},dev={dev},text=sentence,label=tags,label_sep=|", small_bert)
  config.predict = True
  results = _train(config, tmp_path / "run")
  assert 0.0 <= results["eval_micro_f1"] <= 1.0 and "exact_match" in results
  with open(tmp_path / "run" / "model_config.json") as f:
    assert json.load(f)["labels"] == ["long", "negative", "positive"]
  with open(tmp_path / "run" / "predictions_dev.csv", newline="") as f:
    predicted = list(csv.reader(f))
  assert predicted[0] == ["line", "prediction"] and len(predicted) == 33
  assert all(set(filter(None, p.split("|"))) <= {"long", "negative", "positive"}
             for _, p in predicted[1:])
  # HF's export says what the logits are: its sigmoid and BCE (problem_type), and the names.
  from bert_jax.commands.convert import convert
  convert(str(tmp_path / "run"), str(tmp_path / "hf"), to="hf")
  with open(tmp_path / "hf" / "config.json") as f:
    raw = json.load(f)
  assert raw["problem_type"] == "multi_label_classification"
  assert raw["id2label"] == {"0": "long", "1": "negative", "2": "positive"}


def test_a_tfds_dataset_trains_and_predicts_its_test_split(tmp_path, data_dir,
                                                          small_bert):  # noqa: F811
  rows = _sst2(data_dir, 88)
  record = lambda text, label, i: {"sentence": text, "label": label, "idx": i}
  records = {"train": [record(t, SENTIMENT.index(y), i) for i, (t, y) in enumerate(rows[:64])],
             "validation": [record(t, SENTIMENT.index(y), i)
                            for i, (t, y) in enumerate(rows[64:80])],
             "test": [record(t, -1, i) for i, (t, _) in enumerate(rows[80:])]}
  config = _config("dataset=tfds:glue/sst2,test=test,text=sentence,label=label", small_bert)
  config.predict = True
  with mock_tfds(records):
    results = _train(config, tmp_path / "run")
  assert 0.0 <= results["eval_accuracy"] <= 1.0
  with open(tmp_path / "run" / "model_config.json") as f:
    assert json.load(f)["labels"] == list(SENTIMENT)  # tfds's class names
  with open(tmp_path / "run" / "predictions_test.jsonl") as f:
    predicted = [json.loads(line) for line in f]
  assert [p["index"] for p in predicted] == list(range(8))
  assert {p["prediction"] for p in predicted} <= set(SENTIMENT)
  # A feature the dataset lacks, and a labelled split's -1, name the dataset and record.
  with mock_tfds(records), pytest.raises(DataFormatError, match=r"tfds:glue/sst2:train: the "
                                                                 r"features have no column 'text'"):
    classify_reader.read_labelled("tfds:glue/sst2", _columns(text="text"), "", None,
                                  dataset_split="train")
  with mock_tfds({"test": records["test"]}), pytest.raises(
      DataFormatError, match=r"tfds:glue/sst2:test\[0\]: column 'label' is missing"):
    classify_reader.read_labelled("tfds:glue/sst2", _columns(), "", None, dataset_split="test")


def test_a_saved_hugging_face_dataset_reads_with_its_class_names(tmp_path, data_dir):
  datasets = pytest.importorskip("datasets")
  rows = _sst2(data_dir, 12)
  sentiment = datasets.ClassLabel(names=list(SENTIMENT))
  features = datasets.Features({"text": datasets.Value("string"), "label": sentiment,
                                "tags": datasets.Sequence(datasets.ClassLabel(names=["a", "b"]))})
  split = lambda part: datasets.Dataset.from_dict(
      {"text": [t for t, _ in part], "label": [SENTIMENT.index(y) for _, y in part],
       "tags": [[0, 1][:i % 3] for i in range(len(part))]}, features=features)
  datasets.DatasetDict({"train": split(rows[:8]), "validation": split(rows[8:])}).save_to_disk(
      str(tmp_path / "saved"))
  source = f"hf:{tmp_path / 'saved'}"
  problem, labels, examples = classify_reader.read_labelled(
      source, _columns(text="text"), "", None, dataset_split="train")
  assert (problem, labels) == ("single_label", SENTIMENT)
  assert [(e.text_a, e.label) for e in examples] == rows[:8]
  assert examples[3].provenance == f"{source}:train[3]"
  # A sequence of classes is multi-label; a split the folder lacks names the splits it has.
  problem, labels, examples = classify_reader.read_labelled(
      source, _columns(text="text", label="tags"), "", None, dataset_split="validation")
  assert (problem, labels) == ("multi_label", ("a", "b"))
  assert [e.label for e in examples] == [(), ("a",), ("a", "b"), ()]
  with pytest.raises(ValueError, match=r"saved: no split 'test' \(splits: \['train', "
                                       r"'validation'\]\)"):
    classify_reader.read_labelled(source, _columns(text="text"), "", None, dataset_split="test")
