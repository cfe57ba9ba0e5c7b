"""Picking the epoch on held-back training examples (config.data.select_fraction)."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from bert_jax.run import tasks
from bert_jax.run import steps, trainer
from bert_jax.finetune import glue_reader, sources
from bert_jax.text.tokenizers import make_tokenizer
from configs import conll, glue, swag

from tests.helpers.runs import run_finetune


def test_keep_best_keeps_a_better_score_only():
  params = {"w": jnp.zeros(3)}
  state = steps.SelectingTrainState(step=jnp.int32(4), params={"w": jnp.ones(3)},
                                      opt_state=(), best_params=params,
                                      best_score=jnp.float32(-jnp.inf), best_step=jnp.int32(0))
  state = steps.keep_best(state, jnp.float32(0.5))
  assert float(state.best_score) == 0.5 and int(state.best_step) == 4
  np.testing.assert_array_equal(state.best_params["w"], 1.0)
  for worse in (0.5, 0.4, float("nan")):  # a tie keeps the earlier step; NaN never wins
    kept = steps.keep_best(state.replace(step=jnp.int32(8), params={"w": jnp.full(3, 2.0)}),
                             jnp.float32(worse))
    assert float(kept.best_score) == 0.5 and int(kept.best_step) == 4
    np.testing.assert_array_equal(kept.best_params["w"], 1.0)


def test_the_held_back_examples_leave_the_training_rows(small_bert):  # noqa: F811
  config = glue.get_config("dataset=sst2,train_examples=40")
  config.init_from = small_bert
  config.data.select_fraction = 0.25
  config.data.pack_each_batch, config.data.batch_size = False, 10
  task = tasks.make_task(config, trainer.resolve_model_config(config))
  inputs = task.make_inputs(make_tokenizer(config.data, model_dir=small_bert), 0, 1)
  # Rows as their real tokens (batches are cut to their own widths).
  held = {tuple(r[m > 0]) for b in inputs.select.epoch_batches(0)
          for r, m, v in zip(b["input_ids"], b["attention_mask"], b["valid"]) if v}
  trained = {tuple(r[m > 0]) for b in inputs.train.epoch_batches(0)
             for r, m in zip(b["input_ids"], b["attention_mask"]) if m.sum() > 0}
  assert len(inputs.select_metadata) == 10 and inputs.select_metric == "accuracy"
  assert len(trained) + len(held) <= 40 and not held & trained
  # The held-back rows are the examples their metadata names (what scoring reads).
  tokenizer = make_tokenizer(config.data, model_dir=small_bert)
  first = tokenizer.encode_for_model([inputs.select_metadata[0].text_a], None,
                                     max_length=config.data.max_seq_length)["input_ids"][0]
  batch = next(inputs.select.epoch_batches(0))
  width = batch["input_ids"].shape[1]
  assert tuple(batch["input_ids"][0]) == tuple(first[:width]) and not first[width:].any()

  with pytest.raises(ValueError, match="select_fraction=1.5: must be in"):
    config.data.select_fraction = 1.5
    tasks.make_task(config, trainer.resolve_model_config(config))
  choices = swag.get_config("runlocal=True")  # rows are examples of 4 choices
  choices.init_from, choices.data.select_fraction = small_bert, 0.25
  task = tasks.make_task(choices, trainer.resolve_model_config(choices))
  inputs = task.make_inputs(make_tokenizer(choices.data, model_dir=small_bert), 0, 1)
  held = np.concatenate([b["label"][b["valid"] > 0] for b in inputs.select.epoch_batches(0)])
  assert len(held) == len(inputs.select_metadata) > 0
  assert list(held) == [e.label for e in inputs.select_metadata]
  tagging = conll.get_config("runlocal=True")
  tagging.init_from, tagging.data.select_fraction = small_bert, 0.1
  with pytest.raises(ValueError, match="the conll task cannot hold back"):
    tasks.make_task(tagging, trainer.resolve_model_config(tagging))


@pytest.mark.slow
def test_a_run_ends_on_the_epoch_that_scored_best_on_the_held_back_examples(
    small_bert, tmp_path):  # noqa: F811
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.data.train_examples, config.data.select_fraction = 200, 0.25  # 50 held back
  config.num_train_epochs = 4.0
  config.optim.learning_rate = 1e-3
  config.checkpoint_every_steps = 1
  config.max_checkpoints_to_keep = 100
  results = run_finetune(config, tmp_path, small_bert)
  with open(tmp_path / "metrics.jsonl") as f:
    scores = {row["step"]: row["select_accuracy"] for row in map(json.loads, f)
              if "select_accuracy" in row}
  per_epoch = results["step"] // 4
  assert sorted(scores) == [per_epoch * e for e in (1, 2, 3, 4)]
  best = max(scores, key=lambda s: (scores[s], -s))  # the first of the highest
  assert results["selected_step"] == best  # its score kept as float32 on device
  assert results["selected_accuracy"] == pytest.approx(scores[best], rel=1e-6)
  # The last checkpoint holds the best epoch's params: the ones saved at that step.
  with ocp.CheckpointManager(os.path.join(tmp_path, "checkpoints")) as manager:
    at_best, last = (manager.restore(s, args=ocp.args.Composite(
        state=ocp.args.StandardRestore()))["state"]["params"] for s in (best, results["step"]))
  jax.tree.map(np.testing.assert_array_equal, last, at_best)


def _examples(*texts):
  return [glue_reader.GlueExample(f"train-{i}", t, None, "1", f"x:{i}")
          for i, t in enumerate(texts)]


def test_phrase_groups_put_each_phrase_with_a_sentence_that_holds_it():
  examples = _examples(
      "the film", "a great film", "the film is a great film", "is", "is a great film",
      "a dull plot ,", "the film", "what a dull plot , sadly", "no part of any  ")
  groups = glue_reader.phrase_groups(examples)
  # Roots: rows inside no longer row (2, 7, 8); "is" and "the film" are spans of 2 and
  # not of 7; the duplicate "the film" (6) goes with its twin; whitespace is not a word.
  assert list(groups) == [2, 2, 2, 2, 2, 7, 2, 7, 8]
  # A phrase of two sentences goes with the first root, the longest first.
  examples = _examples("bad", "so bad", "bad , bad", "it is so bad")
  assert list(glue_reader.phrase_groups(examples)) == [3, 3, 2, 3]
  assert glue_reader.row_groups(examples, "mrpc") is None  # pairs: every row apart


def test_heldout_mask_draws_whole_groups():
  plain = sources.heldout_mask(50, 7, [3, 1])
  expected = np.zeros(50, bool)
  expected[np.random.default_rng([3, 1]).permutation(50)[:7]] = True
  np.testing.assert_array_equal(plain, expected)  # without groups: the plain permutation
  groups = np.repeat(np.arange(10), 5)[np.random.default_rng(0).permutation(50)]
  for seed in range(5):
    held = sources.heldout_mask(50, 7, seed, groups)
    assert held.sum() == 10  # two whole groups of 5: the first reaching 7 rows
    for g in range(10):
      assert len(set(held[groups == g])) == 1
  with pytest.raises(ValueError, match=r"groups has shape \(3,\), expected \(50,\)"):
    sources.heldout_mask(50, 7, 0, [0, 1, 2])


def test_sst2_holds_back_sentences_with_their_phrases(data_dir):
  examples = glue_reader.read_examples(glue_reader.get_dataset("sst2"), "train", None,
                                       data_dir=data_dir)
  groups = glue_reader.phrase_groups(examples)
  words = [tuple(e.text_a.split()) for e in examples]
  for i in np.random.default_rng(0).choice(len(examples), 300, replace=False):
    root = words[groups[i]]  # every row lies inside its group's root
    assert any(root[s:s + len(words[i])] == words[i] for s in range(len(root)))
  kept, held = glue_reader.split_heldout(examples, 0.1, seed=0, dataset="sst2")
  row = lambda e: int(e.guid.split("-")[1])  # noqa: E731
  kept_groups = {groups[row(e)] for e in kept}
  held_groups = {groups[row(e)] for e in held}
  assert not kept_groups & held_groups
  # Scored like dev: the held-back groups' whole sentences, one each; their phrases are in
  # neither list, and the groups held back hold ~10% of the rows.
  assert all(groups[row(e)] == row(e) for e in held) and len(held) == len(held_groups)
  held_rows = len(examples) - len(kept)
  assert abs(held_rows - 0.1 * len(examples)) < 60  # the last group drawn overshoots
  assert sum(np.isin(groups, list(held_groups))) == held_rows
