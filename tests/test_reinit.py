"""config.reinit_layers: the top K encoder layers of init_from's weights start afresh."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import linen as nn

from bert_jax import weights
from bert_jax.run import init_chain
from bert_jax.models import headed
from bert_jax.models.config import config_for_size


def _classifier_params(config, seed):
  model = headed.BertForSequenceClassification(config, num_labels=2)
  ids = jnp.ones((1, 8), jnp.int32)
  return jax.device_get(nn.unbox(model.init(jax.random.key(seed), ids, jnp.zeros_like(ids),
                                           jnp.ones_like(ids))["params"]))


def _leaves(tree):
  return {"/".join(str(getattr(k, "key", k)) for k in path): np.asarray(leaf)
          for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


@pytest.mark.parametrize("family,scan", [("bert", False), ("bert", True),
                                         ("modernbert", False)])
def test_the_top_layers_come_from_the_fresh_init_and_the_rest_stays(family, scan):
  config = config_for_size("tiny", vocab_size=40, family=family, num_hidden_layers=3,
                           scan_layers=scan)
  loaded, fresh = _classifier_params(config, 0), _classifier_params(config, 1)
  params, note = init_chain.reinit_top_layers(loaded, fresh, 2)
  assert note == "layer_1, layer_2 of 3 from the fresh init"
  got, old, new = _leaves(params), _leaves(loaded), _leaves(fresh)
  assert got.keys() == old.keys()
  moved = 0
  for name, value in got.items():
    if scan and "/encoder/layers/" in name:  # [L, ...]: layer 0 kept, 1-2 fresh
      np.testing.assert_array_equal(value[:1], old[name][:1])
      np.testing.assert_array_equal(value[1:], new[name][1:])
      moved += 1
    elif "/encoder/layer_1/" in name or "/encoder/layer_2/" in name:
      np.testing.assert_array_equal(value, new[name])
      moved += 1
    else:  # embeddings, layer_0, final norm, pooler, classifier: as loaded
      np.testing.assert_array_equal(value, old[name])
  assert moved > 0


def test_bad_counts_and_a_random_init_are_refused():
  config = config_for_size("tiny", vocab_size=40, num_hidden_layers=2)
  params = _classifier_params(config, 0)
  for count in (3, -1):
    with pytest.raises(ValueError, match="expected 1 to the encoder's 2 layers"):
      init_chain.reinit_top_layers(params, params, count)
  run = ml_collections.ConfigDict({"init_from": "some/model", "random_init": True,
                                   "reinit_layers": 1, "init_word_vectors": ""})
  with pytest.raises(ValueError, match="set init_from and random_init=false"):
    init_chain.fresh_start(run, lambda: params, config)


def test_fresh_start_reinitialises_after_loading_init_from(minilm_dir):
  """The chain on real weights: all-MiniLM-L6-v2 loaded, its layers 4-5 replaced."""
  config = weights.load_config(minilm_dir)
  fresh = _classifier_params(config, 0)
  run = ml_collections.ConfigDict({"init_from": minilm_dir, "random_init": False,
                                   "reinit_layers": 2, "init_word_vectors": ""})
  params, lines = init_chain.fresh_start(run, lambda: fresh, config)
  assert lines[-1] == ("Re-initialised (config.reinit_layers): layer_4, layer_5 of 6 from "
                       "the fresh init")
  got, new = _leaves(params), _leaves(fresh)
  for name in got:
    same = np.array_equal(got[name], new[name])
    if "/encoder/layer_4/" in name or "/encoder/layer_5/" in name:
      assert same, name
    elif "/encoder/" in name or "/embeddings/" in name:
      assert not same, name  # MiniLM's weights, not the fresh init
