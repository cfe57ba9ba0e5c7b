"""Pretraining pieces chosen by name: example builders, masking selectors, objectives.

Each table takes a new entry without any change to the stream or the trainer: the tests
below add a selector and an objective from outside (monkeypatching the tables) and run
them through the real pipeline and trainer. Unknown names are one-line errors.
"""
import json
import os

import jax
import numpy as np
import pytest
import tensorflow as tf

from bert_jax.run import trainer
from bert_jax.pretrain import builders
from bert_jax.pretrain import masking
from bert_jax.pretrain import objectives
from bert_jax.pretrain import selectors
from bert_jax.pretrain import pipeline
from bert_jax.text.wordpiece import WordPieceTokenizer
from tests.helpers.runs import tiny_pretraining_config

def small_config(corpus, **changes):
  return tiny_pretraining_config(corpus, **{"num_train_steps": 3, "eval_every_steps": 0,
                                            "checkpoint_every_steps": 100, **changes})


def rows(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


def test_mlm_only_has_no_nsp_head_and_logs_no_nsp(corpus, tmp_path):
  trainer.train_and_evaluate(small_config(corpus, objectives="mlm"), str(tmp_path))
  first = rows(str(tmp_path))[0]
  assert "mlm_loss" in first and not any(k.startswith("nsp") for k in first)
  assert first["loss"] == pytest.approx(first["mlm_loss"], rel=1e-6)
  import bert_jax
  model, variables = bert_jax.load_pretrained(str(tmp_path))
  assert set(variables["params"]) == {"bert", "mlm_head"}
  assert model.sentence_heads == ()


def test_objective_weights_scale_the_logged_loss(corpus, tmp_path):
  trainer.train_and_evaluate(small_config(corpus, objectives="mlm:1,nsp:0.5"), str(tmp_path))
  first = rows(str(tmp_path))[0]
  assert first["loss"] == pytest.approx(first["mlm_loss"] + 0.5 * first["nsp_loss"], rel=1e-5)


@pytest.mark.parametrize("changes, message", [
    ({"objectives": "mlm,sop_typo"}, r"unknown objective 'sop_typo'; expected names from"),
    ({"objectives": "mlm:x"}, r"weight 'x' of mlm is not a number"),
    ({"objectives": ""}, r"names no objective"),
    ({"data.example_builder": "full_sentence"}, r"example_builder='full_sentence': expected"),
    ({"data.masking": "spans"}, r"masking='spans': expected one of"),
])
def test_unknown_names_are_one_line_errors(corpus, tmp_path, changes, message):
  with pytest.raises(ValueError, match=message):
    trainer.train_and_evaluate(small_config(corpus, **changes), str(tmp_path))
  assert not os.listdir(tmp_path) or not os.path.exists(tmp_path / "checkpoints")


def test_an_objective_needs_its_builders_labels(corpus, tmp_path, monkeypatch):
  single = builders.ExampleBuilder(**{**vars(builders.BUILDERS["nsp_pairs"]),
                                      "label_fields": ()})
  monkeypatch.setitem(builders.BUILDERS, "pairs_without_labels", single)
  config = small_config(corpus, **{"data.example_builder": "pairs_without_labels"})
  with pytest.raises(ValueError, match=r"reads \['next_sentence_labels'\], which "
                     r"config.data.example_builder='pairs_without_labels' does not make"):
    trainer.train_and_evaluate(config, str(tmp_path))


def test_a_new_selector_is_one_table_entry(corpus, vocab_path, monkeypatch):
  """'first_tokens' (select the first `budget` eligible tokens) through the real stream."""
  def first_tokens(input_ids, eligible, scores, budget, options):
    rank = tf.cumsum(tf.cast(eligible, tf.int32), axis=1)
    selected = eligible & (rank <= budget[:, None])
    return selectors.Selection(selected, tf.where(selected, rank, 0))
  monkeypatch.setitem(selectors.SELECTORS, "first_tokens", selectors.Selector(first_tokens))
  config = small_config(corpus, **{"data.masking": "first_tokens"})
  train, _ = pipeline.make_inputs(config.data, WordPieceTokenizer(vocab_path))
  batch = next(train)
  weights = batch["masked_lm_weights"] > 0
  for row in range(len(weights)):
    k = int(weights[row].sum())
    np.testing.assert_array_equal(batch["masked_lm_positions"][row][:k], np.arange(1, k + 1))


def test_a_new_objective_is_one_table_entry(corpus, tmp_path, monkeypatch):
  """A second MLM-like term ('mlm_again', same sums) trains through the unchanged trainer."""
  mlm = objectives.OBJECTIVES["mlm"]
  again = objectives.Objective(
      "mlm_again", lambda o, b: {"mlm_again_loss": mlm.sums(o, b)["mlm_loss"]},
      lambda b: {"mlm_again": mlm.denominators(b)["mlm"]},
      lambda s, d: {"mlm_again_loss": s["mlm_again_loss"] / d["mlm_again"]})
  monkeypatch.setitem(objectives.OBJECTIVES, "mlm_again", again)
  trainer.train_and_evaluate(small_config(corpus, objectives="mlm,mlm_again:2"), str(tmp_path))
  first = rows(str(tmp_path))[0]
  assert first["mlm_again_loss"] == pytest.approx(first["mlm_loss"], rel=1e-6)
  assert first["loss"] == pytest.approx(3 * first["mlm_loss"], rel=1e-5)
  assert np.isfinite(jax.device_get(first["loss"]))


@pytest.mark.slow
def test_sop_pretrains_with_its_own_head(corpus, tmp_path):
  """ALBERT's objective on BERT: example_builder=sop + objectives mlm,sop (no NSP head)."""
  config = small_config(corpus, objectives="mlm,sop", **{"data.example_builder": "sop"})
  trainer.train_and_evaluate(config, str(tmp_path))
  first = rows(str(tmp_path))[0]
  assert {"mlm_loss", "sop_loss", "sop_accuracy"} <= set(first)
  assert not any(k.startswith("nsp") for k in first)
  import bert_jax
  _, variables = bert_jax.load_pretrained(str(tmp_path))
  assert set(variables["params"]) == {"bert", "mlm_head", "sop_head"}
  with pytest.raises(ValueError, match=r"reads \['next_sentence_labels'\], which "
                     r"config.data.example_builder='sop' does not make"):
    trainer.train_and_evaluate(small_config(corpus, **{"data.example_builder": "sop"}),
                               str(tmp_path / "nsp_on_sop"))

  # num_train_steps=0 + init_from evaluates the pretrained model and trains nothing: on its
  # own task it gives the run's own held-out numbers, with the run's head, not a new one.
  again = str(tmp_path / "again")
  results = trainer.train_and_evaluate(
      small_config(corpus, objectives="mlm,sop", num_train_steps=0, init_from=str(tmp_path),
                   **{"data.example_builder": "sop"}), again)
  with open(os.path.join(str(tmp_path), "eval_results.json")) as f:
    own = json.load(f)
  for key in ("eval_sop_accuracy", "eval_sop_loss", "eval_mlm_accuracy", "eval_mlm_loss"):
    assert results[key] == pytest.approx(own[key], rel=1e-5, abs=1e-6), key
  assert not os.path.exists(os.path.join(again, "checkpoints")) or not os.listdir(
      os.path.join(again, "checkpoints"))
  # ALBERT's Table 5 cross column: the SOP head scored on NSP pairs (label 0 = B follows A
  # in both tasks), read from the checkpoint's sop_head.
  cross = trainer.train_and_evaluate(
      small_config(corpus, objectives="mlm,sop_on_nsp", num_train_steps=0,
                   init_from=str(tmp_path)), str(tmp_path / "cross"))
  assert 0.0 <= cross["eval_sop_on_nsp_accuracy"] <= 1.0
  assert cross["eval_mlm_loss"] != pytest.approx(own["eval_mlm_loss"], rel=1e-5)  # NSP rows
  assert objectives.OBJECTIVES["sop_on_nsp"].sentence_head == "sop"
  assert objectives.OBJECTIVES["nsp_on_sop"].label_fields == ("sentence_order_labels",)


@pytest.mark.parametrize("builder", ["sop", "sop_equal_lengths"])
def test_inspect_reports_the_sop_swapped_share(corpus, vocab_path, builder):
  from bert_jax.pretrain import inspect as inspect_lib
  config = small_config(corpus, **{"data.example_builder": builder, "data.batch_size": 32})
  tokenizer = WordPieceTokenizer(vocab_path)
  train, _ = pipeline.make_inputs(config.data, tokenizer)
  special = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
  continuation = masking.continuation_table_from_vocab(list(tokenizer.vocab))
  stats, batches = inspect_lib.statistics(train, 60, special, tokenizer.mask_id,
                                          continuation)
  assert abs(stats["sop_swapped_fraction"] - 0.5) < 0.03, stats
  assert "is_next_fraction" not in stats
  # The length rule, recomputed from the batches: [CLS] A [SEP] is type 0, B [SEP] type 1.
  agree = total = 0
  for batch in batches:
    for types, real, label in zip(batch["token_type_ids"], batch["attention_mask"],
                                  batch["sentence_order_labels"]):
      first, second = sum(real[types == 0]) - 2, sum(real[types == 1]) - 1
      agree += (first < second) == (label == 0)
      total += 1
  assert stats["pair_length_rule"] == pytest.approx(max(agree, total - agree) / total)
  assert 0.5 <= stats["pair_length_rule"] <= 1.0
  if builder == "sop_equal_lengths":  # the lengths say nothing: the rule reads the swap share
    assert stats["pair_length_rule"] < 0.53, stats


@pytest.mark.slow
@pytest.mark.parametrize("builder", ["full_sentences", "doc_sentences", "token_stream"])
def test_roberta_sentence_blocks_pretrain_mlm_only(corpus, tmp_path, vocab_path, builder):
  config = small_config(corpus, objectives="mlm", **{"data.example_builder": builder})
  train, _ = pipeline.make_inputs(config.data, WordPieceTokenizer(vocab_path))
  batch = next(train)
  assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "masked_lm_positions",
                        "masked_lm_ids", "masked_lm_weights"}
  assert (batch["token_type_ids"] == 0).all()
  if builder == "full_sentences":  # blocks end only where the next sentence does not fit
    assert batch["attention_mask"].mean() > 0.8
  if builder == "token_stream":  # rows end only where they are full
    assert batch["attention_mask"].mean() > 0.99
  trainer.train_and_evaluate(config, str(tmp_path))
  assert np.isfinite([r["mlm_loss"] for r in rows(str(tmp_path)) if "mlm_loss" in r]).all()


def test_token_stream_refuses_packing(corpus, vocab_path):
  config = small_config(corpus, objectives="mlm", **{"data.example_builder": "token_stream",
                                                     "data.packing": True})
  with pytest.raises(ValueError, match="token_stream.*already full"):
    pipeline.make_inputs(config.data, WordPieceTokenizer(vocab_path))


def test_static_masking_that_never_repeats_an_epoch_says_so(capsys):
  """data.dupe_factor N only differs from dynamic masking in runs of more than N epochs."""
  import ml_collections
  from bert_jax.pretrain import task as pretrain_task

  class Input:
    def steps_in_epoch(self, epoch):
      return 117

  def say(dupe_factor, steps):
    config = ml_collections.ConfigDict({"data": {"dupe_factor": dupe_factor},
                                        "num_train_steps": steps})
    pretrain_task._say_if_static_masking_never_repeats(config, Input())
    return capsys.readouterr().err

  assert say(10, 1000) == (
      "static masking: config.data.dupe_factor=10 but num_train_steps=1000 read 8.5 epochs "
      "of 117 batches, so no epoch repeats and every mask is new, as with dynamic masking "
      "(dupe_factor=0)\n")
  assert say(2, 1000) == say(0, 1000) == ""
