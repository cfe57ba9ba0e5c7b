"""GLUE readers on the real files, tfds (mocked), featurisation, scores and bad input."""
import collections

import numpy as np
import pytest

from bert_jax.finetune import glue_reader as glue
from bert_jax.finetune.sources import DataFormatError
from tests.helpers.tfds_mock import mock_tfds



def _label_counts(examples):
  return dict(collections.Counter(e.label for e in examples))


# Label counts from ../shared/data/README.md.
@pytest.mark.parametrize("task, split, counts", [
    ("sst2", "train", {"0": 29780, "1": 37569}),
    ("sst2", "dev", {"0": 428, "1": 444}),
    ("cola", "train", {"0": 2528, "1": 6023}),  # No header.
    ("cola", "dev", {"0": 322, "1": 721}),      # No header, no final newline.
    ("mrpc", "train", {"0": 1194, "1": 2474}),  # BOM, quality column.
    ("rte", "train", {"entailment": 1249, "not_entailment": 1241}),
    ("wnli", "dev", {"0": 40, "1": 31}),
])
def test_real_files_have_the_published_label_counts(data_dir, task, split, counts):
  examples = glue.read_examples(task, split, data_dir=data_dir)
  assert _label_counts(examples) == counts
  assert all(e.text_a for e in examples)
  assert all((e.text_b is None) == (glue.DATASETS[task].layout.text_b is None)
             for e in examples)


def test_file_specific_quirks(data_dir):
  cola = glue.read_examples("cola", "dev", data_dir=data_dir)
  assert cola[-1].provenance.endswith("CoLA/dev.tsv:1043")
  mrpc = glue.read_examples("mrpc", "train", data_dir=data_dir)
  assert mrpc[0].text_a.startswith("Amrozi accused his brother")
  assert mrpc[0].text_b.startswith("Referring to him as only")
  assert mrpc[0].label == "1"
  stsb = glue.read_examples("stsb", "train", data_dir=data_dir)
  assert len(stsb) == 5749 and stsb[0].label == 5.0 and stsb[1].label == 3.8
  assert all(0.0 <= e.label <= 5.0 for e in stsb)


def test_k_shot_and_first_rows_files_by_path(data_dir):
  mnli = glue.read_examples("mnli", "train", "glue/MNLI/k-shot/16-13/train.tsv",
                            data_dir=data_dir)
  assert _label_counts(mnli) == {"entailment": 16, "neutral": 16, "contradiction": 16}
  dev = glue.read_examples("mnli", "dev_matched",
                           "glue/MNLI/k-shot/16-42/dev_matched.tsv", data_dir=data_dir)
  assert len(dev) == 48
  matched = glue.read_examples("mnli", "dev_matched",
                               "glue/MNLI/first_rows/dev_matched.tsv", data_dir=data_dir)
  assert _label_counts(matched) == {"contradiction": 3, "entailment": 1, "neutral": 1}
  assert matched[0].text_a == "The new rights are nice enough"
  assert matched[0].text_b == "Everyone really likes the newest benefits "
  mismatched = glue.read_examples(
      "mnli", "dev_mismatched", "glue/MNLI/first_rows/dev_mismatched.tsv",
      data_dir=data_dir)
  assert _label_counts(mismatched) == {"contradiction": 3, "entailment": 2}
  qqp = glue.read_examples("qqp", "dev", "glue/QQP/k-shot/16-100/dev.tsv",
                           data_dir=data_dir)
  assert _label_counts(qqp) == {"0": 16, "1": 16}
  assert qqp[0].text_a.endswith("?")


def test_table_covers_nine_tasks():
  assert sorted(glue.DATASETS) == sorted(
      ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"])
  assert glue.DATASETS["mnli"].files["dev_mismatched"] == "glue/MNLI/dev_mismatched.tsv"
  assert glue.DATASETS["stsb"].num_labels == 1 and glue.DATASETS["mnli"].num_labels == 3
  assert glue.DATASETS["cola"].metrics == ("matthews_corrcoef",)


def test_featurize_single_and_pair(data_dir, tokenizer):
  examples = glue.read_examples("rte", "train", data_dir=data_dir)[:8]
  features = glue.featurize(examples, "rte", tokenizer, max_seq_length=64)
  assert {k: (v.shape, v.dtype) for k, v in features.items()} == {
      "input_ids": ((8, 64), np.int32), "token_type_ids": ((8, 64), np.int32),
      "attention_mask": ((8, 64), np.int32), "label": ((8,), np.int32),
      "example_index": ((8,), np.int32)}
  expected = tokenizer.encode_for_model([e.text_a for e in examples],
                                        [e.text_b for e in examples], 64)
  np.testing.assert_array_equal(features["input_ids"], expected["input_ids"])
  assert features["token_type_ids"].max() == 1
  np.testing.assert_array_equal(features["label"], [
      glue.DATASETS["rte"].labels.index(e.label) for e in examples])
  stsb = glue.read_examples("stsb", "dev", data_dir=data_dir)[:4]
  stsb_features = glue.featurize(stsb, "stsb", tokenizer, max_seq_length=32)
  assert stsb_features["label"].dtype == np.float32
  np.testing.assert_allclose(stsb_features["label"], [e.label for e in stsb])
  sst2 = glue.read_examples("sst2", "dev", data_dir=data_dir)[:4]
  assert glue.featurize(sst2, "sst2", tokenizer, 16)["token_type_ids"].max() == 0


def test_load_split_and_score(data_dir, tokenizer):
  config = {"dataset": "mrpc", "data_dir": data_dir,
            "sources": {"train": "glue/MRPC/train.tsv"}}
  features, examples = glue.load_split(config, "train", tokenizer, 32)
  assert len(examples) == features["input_ids"].shape[0] == 3668
  logits = np.eye(2)[features["label"]]
  assert glue.score(logits, examples, "mrpc") == {"f1": 1.0, "accuracy": 1.0}
  stsb = glue.read_examples("stsb", "dev", data_dir=data_dir)
  scores = np.array([e.label for e in stsb])
  result = glue.score(scores + 0.1, stsb, "stsb")
  assert result["pearson"] == pytest.approx(1.0)
  assert result["spearman"] == pytest.approx(1.0)


def test_heldout_split_is_disjoint_from_train_and_fixed_by_seed(data_dir, tokenizer):
  config = {"dataset": "rte", "data_dir": data_dir, "heldout_fraction": 0.1, "heldout_seed": 0}
  _, train = glue.load_split(config, "train", tokenizer, 16)
  _, heldout = glue.load_split(config, "heldout", tokenizer, 16)
  assert (len(train), len(heldout)) == (2241, 249)
  pairs = lambda examples: {(e.text_a, e.text_b) for e in examples}
  assert not pairs(train) & pairs(heldout)
  _, again = glue.load_split(config, "heldout", tokenizer, 16)
  assert [e.text_a for e in again] == [e.text_a for e in heldout]
  _, other = glue.load_split({**config, "heldout_seed": 1}, "heldout", tokenizer, 16)
  assert [e.text_a for e in other] != [e.text_a for e in heldout]
  with pytest.raises(ValueError, match="heldout_fraction"):
    glue.load_split({"dataset": "rte", "data_dir": data_dir}, "heldout", tokenizer, 16)


# ------------------------------------------------------------------------------------
# tfds (mocked: no download).
# ------------------------------------------------------------------------------------
def test_tfds_mnli_maps_to_the_file_labels():
  # tfds MNLI classes: entailment, neutral, contradiction.
  records = [{"premise": f"p{i}", "hypothesis": f"h{i}", "label": i, "idx": i}
             for i in range(3)]
  test_records = [{"premise": "p", "hypothesis": "h", "label": -1, "idx": 0}]
  with mock_tfds({"validation_mismatched": records, "test_matched": test_records}):
    examples = glue.read_examples("mnli", "dev_mismatched", "tfds:glue/mnli")
    test = glue.read_examples("mnli", "test_matched", "tfds:glue/mnli")
  assert [e.label for e in examples] == ["entailment", "neutral", "contradiction"]
  assert (examples[0].text_a, examples[0].text_b) == ("p0", "h0")
  assert test[0].label is None


@pytest.mark.parametrize("task, texts, tfds_label, label", [
    ("cola", {"sentence": "s"}, 1, "1"),
    ("sst2", {"sentence": "s"}, 0, "0"),
    ("mrpc", {"sentence1": "a", "sentence2": "b"}, 1, "1"),
    ("qqp", {"question1": "a", "question2": "b"}, 1, "1"),
    ("qnli", {"question": "a", "sentence": "b"}, 1, "not_entailment"),
    ("rte", {"sentence1": "a", "sentence2": "b"}, 0, "entailment"),
    ("wnli", {"sentence1": "a", "sentence2": "b"}, 1, "1"),  # tfds 1 = entailment.
    ("stsb", {"sentence1": "a", "sentence2": "b"}, 3.25, 3.25),
])
def test_tfds_tasks(task, texts, tfds_label, label):
  with mock_tfds({"validation": [{**texts, "label": tfds_label, "idx": 0}]}):
    (example,) = glue.read_examples(task, "dev", f"tfds:glue/{task}")
  assert example.label == label
  assert example.text_a == next(iter(texts.values()))


# ------------------------------------------------------------------------------------
# Bad input.
# ------------------------------------------------------------------------------------
def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_bad_label_names_file_and_line(tmp_path):
  path = _write(tmp_path, "rte.tsv", "index\tsentence1\tsentence2\tlabel\n"
                "0\ta\tb\tentailment\n1\ta\tb\tcontradiction\n")
  with pytest.raises(DataFormatError, match=r"rte\.tsv:3: label 'contradiction'"):
    glue.read_examples("rte", "train", path)
  stsb = _write(tmp_path, "stsb.tsv", "sentence1\tsentence2\tscore\na\tb\t5.5\n")
  with pytest.raises(DataFormatError, match=r"stsb\.tsv:2: score '5.5'"):
    glue.read_examples("stsb", "train", stsb)


def test_missing_column_names_file_and_line(tmp_path):
  cola = _write(tmp_path, "cola.tsv", "gj04\t1\t\tFine.\ngj04\t0\n")
  with pytest.raises(DataFormatError, match=r"cola\.tsv:2: expected at least 4"):
    glue.read_examples("cola", "train", cola)
  header = _write(tmp_path, "sst.tsv", "text\tlabel\nfine\t1\n")
  with pytest.raises(DataFormatError, match=r"sst\.tsv:1: the header has no column "
                                            r"'sentence'"):
    glue.read_examples("sst2", "train", header)


def test_empty_files(tmp_path):
  with pytest.raises(DataFormatError, match=r"empty\.tsv:1: the file is empty"):
    glue.read_examples("sst2", "train", _write(tmp_path, "empty.tsv", ""))
  with pytest.raises(DataFormatError, match=r"header\.tsv:1: no examples"):
    glue.read_examples("sst2", "train",
                       _write(tmp_path, "header.tsv", "sentence\tlabel\n"))
  with pytest.raises(FileNotFoundError, match="nothing.tsv"):
    glue.read_examples("sst2", "train", str(tmp_path / "nothing.tsv"))


def test_unlabeled_test_split_and_unknown_names(tmp_path):
  path = _write(tmp_path, "test.tsv", "index\tsentence\n0\tA test sentence.\n")
  (example,) = glue.read_examples("cola", "test", path)  # CoLA test has a header.
  assert example.label is None and example.text_a == "A test sentence."
  assert glue.score(np.zeros((1, 2)), [example], "cola") == {}  # a test split: no metrics
  labelled = glue.read_examples("cola", "dev", _write(tmp_path, "dev.tsv", "s\t1\t\tgood\n"))
  with pytest.raises(ValueError, match=r"test\.tsv:2: no label, though 1 of the split's 2 "):
    glue.score(np.zeros((2, 2)), [*labelled, example], "cola")
  with pytest.raises(ValueError, match="Unknown GLUE dataset"):
    glue.read_examples("squad", "train")
  with pytest.raises(ValueError, match="no split 'dev'"):
    glue.read_examples("mnli", "dev")
