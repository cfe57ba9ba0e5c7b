"""Fine-tuning from pre-tokenized shards (bert_jax/finetune/shards.py): each split read and
featurized once and written with its examples; a run from them reads no source file, imports
no TensorFlow and scores as the run from the files."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_jax.commands import finetune_shards
from bert_jax.run.tasks import make_task
from bert_jax.run.trainer import resolve_model_config
from bert_jax.text.tokenizers import make_tokenizer
from configs import classify, glue, squad, swag
from configs import tag as tag_config
from tests.helpers.runs import REPO, run_finetune


def _glue(small_bert):
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.init_from = small_bert
  return config


def _eval_numbers(workdir) -> tuple[dict, list]:
  with open(os.path.join(workdir, "eval_results.json")) as f:
    results = {k: v for k, v in json.load(f).items() if k.startswith("eval_")}
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
  return results, losses


@pytest.mark.slow
def test_glue_from_shards_without_tensorflow_scores_as_from_the_files(small_bert, tmp_path):
  run_finetune(_glue(small_bert), tmp_path / "files", small_bert)
  prefix = str(tmp_path / "shards" / "sst2")
  paths = finetune_shards.write(_glue(small_bert), prefix)
  assert [os.path.basename(p) for p in paths] == ["sst2-train.npz", "sst2-dev.npz"]
  overrides = {"init_from": small_bert, "data.shards": prefix,
               "data.data_dir": str(tmp_path / "no_data_root")}  # no source is read
  result = subprocess.run(
      [sys.executable, "tests/tf_free_worker.py", "--config=glue:dataset=sst2,runlocal=True",
       f"--config_json={json.dumps(overrides)}", f"--workdir={tmp_path / 'from_shards'}"],
      cwd=REPO, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  assert json.loads(result.stdout.strip().splitlines()[-1])["tensorflow_modules"] == []
  expected, got = _eval_numbers(tmp_path / "files"), _eval_numbers(tmp_path / "from_shards")
  assert "eval_accuracy" in expected[0] and len(expected[1]) >= 2
  assert got == expected  # the same features, batches and steps: the same numbers


def _write_csv(path, rows):
  with open(path, "w", encoding="utf-8") as f:
    f.write("sentence,tags\n" + "".join(f"{text},{tags}\n" for text, tags in rows))
  return str(path)


def _write_conll(path, sentences):
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join("".join(f"{w} {t}\n" for w, t in s) + "\n" for s in sentences))
  return str(path)


def _classify(tmp_path):
  words = ["good film", "bad plot", "great cast", "dull and long", "fine music", "weak end"]
  tags = ["a|b", "c", "a", "b|c", "a|c", "b"]
  bad = [("", "a")]  # an empty text: skipped and counted (skip_bad_rows)
  train = _write_csv(tmp_path / "train.csv", list(zip(words * 2, tags * 2)) + bad)
  dev = _write_csv(tmp_path / "dev.csv", list(zip(words[::-1], tags)))
  return (classify.get_config(f"train={train},dev={dev},text=sentence,label=tags,"
                              "label_sep=|,skip_bad_rows=True,runlocal=True"), [train, dev])


def _tag(tmp_path):
  sentences = [[("Peter", "B-PERSON"), ("met", "O"), ("Anna", "B-PERSON")],
               [("in", "O"), ("New", "B-PLACE"), ("York", "I-PLACE")],
               [("Acme", "B-COMPANY"), ("Inc", "I-COMPANY"), ("grew", "O")]]
  train = _write_conll(tmp_path / "train.txt", sentences * 3)
  dev = _write_conll(tmp_path / "dev.txt", sentences[::-1])
  return tag_config.get_config(f"train={train},dev={dev},runlocal=True"), [train, dev]


def _swag(tmp_path):
  del tmp_path
  return swag.get_config("runlocal=True"), []  # the data root's sample: left in place


def _task(config, small_bert):
  config.init_from = small_bert
  return make_task(config, resolve_model_config(config))


@pytest.mark.parametrize("make", [_classify, _tag, _swag],
                         ids=["classify_multi_label", "tag", "swag"])
def test_the_shards_hold_what_the_files_give(make, small_bert, tmp_path):
  """The task built from the shards, its files gone (or no data root), has the files'
  labels, features and examples (multi-label sets, tag sequences, SWAG's endings) and the
  notes of their skipped rows."""
  config, files = make(tmp_path)
  from_files = _task(config, small_bert)
  tokenizer = make_tokenizer(config.data, model_dir=small_bert)
  expected = {split: from_files.load_split(split, tokenizer) for split in ("train", "dev")}
  prefix = str(tmp_path / "shards" / "x")
  finetune_shards.write(config, prefix)
  for path in files:
    os.remove(path)
  config.data.shards, config.data.data_dir = prefix, str(tmp_path / "no_data_root")
  from_shards = _task(config, small_bert)
  assert from_shards.label_names == from_files.label_names
  assert getattr(from_shards, "problem", None) == getattr(from_files, "problem", None)
  for split, (features, metadata) in expected.items():
    got_features, got_metadata = from_shards.split_data(split, tokenizer)
    assert got_features.keys() == features.keys()
    for key, value in features.items():
      assert got_features[key].dtype == value.dtype, key
      np.testing.assert_array_equal(got_features[key], value, err_msg=key)
    if isinstance(metadata, list):  # rows: classify's label sets, SWAG's endings as tuples
      assert got_metadata == metadata
      assert isinstance(metadata[0].label if make is _classify else metadata[0].endings, tuple)
    else:  # tagging: the sentences and the words' positions
      assert got_metadata.sentences == metadata.sentences
      np.testing.assert_array_equal(got_metadata.word_index, metadata.word_index)
      assert got_metadata.column == from_shards.column
  inputs = from_shards.make_inputs(tokenizer, 0, 1)  # the run's inputs, from the shards
  assert inputs.steps_per_epoch == len(expected["train"][0]["input_ids"]) // config.data.batch_size
  assert inputs.data_notes == from_files.data_notes()
  assert len(inputs.data_notes) == (make is _classify)
  assert inputs.eval.num_rows == len(expected["dev"][0]["input_ids"])


def test_shards_that_do_not_fit_the_run_are_one_line(small_bert, tmp_path):
  config, _ = _tag(tmp_path)
  config.init_from = small_bert
  prefix = str(tmp_path / "shards" / "x")
  finetune_shards.write(config, prefix)
  config.data.shards = prefix
  config.data.max_seq_length = 48
  with pytest.raises(ValueError, match=r"x-train.npz: written with "
                                       r"config.data.max_seq_length=32, this run has 48$"):
    _task(config, small_bert)
  config.data.max_seq_length, config.data.eval_split = 32, "test"
  task = _task(config, small_bert)
  tokenizer = make_tokenizer(config.data, model_dir=small_bert)
  with pytest.raises(ValueError, match=r"config.data.shards=.*: no .*x-test.npz \(split "
                                       r"'test'; python -m bert_jax.commands.finetune_shards"):
    task.make_inputs(tokenizer, 0, 1)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\npeter\n")
  config.data.vocab_path, config.data.eval_split = str(vocab), "dev"
  other = make_tokenizer(config.data)
  with pytest.raises(ValueError, match=r"x-train.npz: written with the tokenizer's "
                                       r"vocab_sha256='[0-9a-f]{64}', this run has"):
    task.make_inputs(other, 0, 1)
  config = squad.get_config("runlocal=True")
  config.data.shards = prefix
  with pytest.raises(ValueError, match=r"^config.data.shards: the squad task has no shard "
                                       r"form \(glue, classify, conll, tag and swag have\)"):
    _task(config, small_bert)
