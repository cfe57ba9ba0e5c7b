"""Cached features for a wholly frozen encoder (config.cache_features): the same losses and
scores as the uncached frozen run through the trainer (dropout off: the cache holds the
encoder's deterministic layers), the encoder run once per example, one-line refusals."""
import json
import os

import jax
import numpy as np
import pytest
from flax import linen as nn

from bert_jax.weights import checkpoint
from bert_jax.finetune import feature_cache
from bert_jax.finetune.conll import ConllTask
from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig
from bert_jax.run import trainer
from configs import conll, glue

ENCODER = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=3,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory, vocab_path):
  """A random L3/H32 encoder saved as a bert_jax model with the real vocab."""
  params = nn.unbox(BertModel(ENCODER).init(jax.random.key(0), np.zeros((1, 4), np.int32)))
  folder = str(tmp_path_factory.mktemp("encoder"))
  checkpoint.save_model(folder, ENCODER, jax.device_get(params["params"]), vocab_path=vocab_path)
  return folder


def _frozen(config, encoder_dir, **fields):
  config.init_from = encoder_dir
  config.data.pack_each_batch = False
  config.model.hidden_dropout_prob = config.model.attention_probs_dropout_prob = 0.0
  config.optim.learning_rate = 1e-2  # the head moves: equal losses are equal training
  config.update({"freeze_encoder": True, **fields})
  return config


def _run(config, workdir):
  trainer.train_and_evaluate(config, str(workdir))
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
  with open(os.path.join(workdir, "eval_results.json")) as f:
    results = json.load(f)
  return losses, {k: v for k, v in results.items() if k.startswith("eval_")}


@pytest.mark.slow
@pytest.mark.parametrize("config,fields,metric", [
    (lambda: conll.get_config("runlocal=True"),
     {"feature_layers": "0,-2,-1", "feature_mix": "scalar_mix", "feature_head": "bilstm"},
     "eval_f1"),
    (lambda: glue.get_config("dataset=sst2,runlocal=True"),
     {"feature_layers": "-2,-1", "feature_head": "bilstm"}, "eval_accuracy"),
], ids=["conll_bilstm_scalar_mix", "sst2_bilstm_concat"])
def test_cached_layers_train_as_the_uncached_frozen_run(config, fields, metric, encoder_dir,
                                                       tmp_path, capsys):
  uncached = _run(_frozen(config(), encoder_dir, **fields), tmp_path / "uncached")
  cached = _run(_frozen(config(), encoder_dir, cache_features=True, **fields),
                tmp_path / "cached")
  assert len(uncached[0]) >= 4 and metric in uncached[1]
  np.testing.assert_allclose(cached[0], uncached[0], rtol=1e-5, atol=1e-6)
  assert cached[1].keys() == uncached[1].keys()
  for key, value in uncached[1].items():
    np.testing.assert_allclose(cached[1][key], value, rtol=1e-5, atol=1e-6, err_msg=key)
  assert capsys.readouterr().out.count("Cached layers") == 2  # train and eval, once each


def test_the_store_gives_each_example_its_real_tokens_and_zeros_past_them():
  store = feature_cache.LayerStore(
      values=np.arange(5, dtype=np.float32).reshape(5, 1, 1), starts=np.array([0, 3]),
      lengths=np.array([3, 2]), slot=np.array([1, -1, 0]))
  out = store.gather(np.array([2, 0]), width=4)[..., 0, 0]
  np.testing.assert_array_equal(out, [[0, 1, 2, 0], [3, 4, 0, 0]])
  with pytest.raises(KeyError, match="example 1 has no cached layers"):
    store.gather(np.array([1]), width=4)


@pytest.mark.parametrize("fields,message", [
    ({"freeze_encoder": False}, r"config.cache_features .*set config.freeze_encoder=true"),
    ({"trainable_layers": "-1"}, r"leave config.trainable_layers empty"),
    ({"feature_layers": ""}, r"config.cache_features caches config.feature_layers, which is"),
    ({"random_init": True}, r"random_init and reinit_layers off"),
    ({"init_from": ""}, r"set config.init_from"),
    ({"init_word_vectors": "vectors.npz"}, r"config.init_word_vectors: .*leave "
     r"init_word_vectors empty"),
    ({"data.pack_each_batch": True}, r"config.data.pack_each_batch: cached features"),
])
def test_a_cache_that_cannot_stand_for_the_frozen_run_is_one_line(fields, message):
  config = conll.get_config("runlocal=True")
  config.update({"init_from": "somewhere", "freeze_encoder": True, "feature_layers": "-1",
                 "cache_features": True})
  config.data.pack_each_batch = False
  for field, value in fields.items():
    parent, _, name = field.rpartition(".")
    (config.data if parent else config)[name] = value
  with pytest.raises(ValueError, match=message) as error:
    ConllTask(config, ENCODER)
  assert "\n" not in str(error.value)
