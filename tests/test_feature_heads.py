"""Frozen encoders and feature-based heads: trainable layers of a frozen encoder, the scalar
mix, the BiLSTM tagger, and one-line errors for bad options (tiny shapes, a few steps)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn

from bert_jax.core import optim
from bert_jax.run import steps
from bert_jax.weights.mapping import flatten
from bert_jax.finetune.conll import ConllTask
from bert_jax.finetune.glue import GlueTask
from bert_jax.models import heads
from bert_jax.models.config import BertConfig
from bert_jax.models.headed import BertForTokenClassification
from configs import conll, glue

TINY = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=20)


def _config(**fields):
  config = conll.get_config("runlocal=True")
  config.data.max_seq_length = 12
  config.update(fields)
  return config


def _batch(seed=0, rows=4, length=12):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(4, length + 1, size=rows)
  mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int32)
  return {"input_ids": jnp.asarray(rng.integers(5, 40, (rows, length)) * mask, jnp.int32),
          "token_type_ids": jnp.zeros((rows, length), jnp.int32),
          "attention_mask": jnp.asarray(mask),
          "labels": jnp.asarray(rng.integers(0, 9, (rows, length)), jnp.int32),
          "label_weights": jnp.asarray(mask, jnp.float32)}


def _train(config, num_steps=3, learning_rate=1e-2):
  """(task, params before, params after, losses) of num_steps AdamW steps on one batch,
  frozen as the trainer freezes (the task's freeze: optim.freeze over
  config.trainable_layers)."""
  task = ConllTask(config, TINY)
  model = task.build_model()
  batch = _batch()
  params = nn.unbox(model.init(jax.random.key(0), batch["input_ids"])["params"])
  tx = task.freeze(optax.adamw(learning_rate, weight_decay=0.1))
  step = jax.jit(steps.make_train_step(task, model, tx, lambda _: learning_rate, 1,
                                       jax.random.key(1)))
  state = steps.TrainState(step=jnp.zeros((), jnp.int32), params=params,
                           opt_state=tx.init(params))
  losses = []
  for _ in range(num_steps):
    state, metrics = step(state, batch)
    losses.append(float(metrics["loss"]))
  return task, flatten(params), flatten(state.params), losses, state.opt_state


def test_a_frozen_encoder_keeps_its_params_bit_identical_but_for_its_trainable_layers():
  """freeze_encoder with trainable_layers=-1: the embeddings and layers 0-1 stay exactly as
  they were (no update, no weight decay, no optimizer state); the top layer and the head
  train; the FLOPs count the top layer's backward pass only."""
  config = _config(freeze_encoder=True, trainable_layers="-1")
  task, before, after, _, opt_state = _train(config)
  frozen = [k for k in before if k.startswith(("bert/embeddings/", "bert/encoder/layer_0/",
                                               "bert/encoder/layer_1/"))]
  trained = [k for k in before if k not in frozen]
  assert len(frozen) > 10 and any(k.startswith("bert/encoder/layer_2/") for k in trained)
  for k in frozen:
    np.testing.assert_array_equal(before[k], after[k], err_msg=k)
  for k in trained:
    assert np.abs(before[k] - after[k]).max() > 0, k
  adam = opt_state.inner_states["trained"].inner_state[0]  # frozen params: MaskedNode
  moments = jax.tree_util.tree_flatten_with_path(adam.mu)[0]
  assert {"/".join(k.key for k in path) for path, _ in moments} == set(trained)
  # Model FLOPs: the forward pass plus the top layer's backward (2 x 1/3 of the encoder).
  whole = ConllTask(_config(), TINY).step_flops(_batch())
  assert task.step_flops(_batch()) == pytest.approx(whole / 3 * (1 + 2 / 3))
  head_only = ConllTask(_config(freeze_encoder=True), TINY)
  assert head_only.step_flops(_batch()) == pytest.approx(whole / 3)


def test_frozen_encoder_trains_only_the_head_and_the_embeddings_can_train_alone():
  _, before, after, _, _ = _train(_config(freeze_encoder=True))
  assert all(np.array_equal(before[k], after[k]) for k in before if k.startswith("bert/"))
  assert not np.array_equal(before["classifier/dense/kernel"], after["classifier/dense/kernel"])
  _, before, after, _, _ = _train(_config(freeze_encoder=True, trainable_layers="0"))
  changed = {k.split("/")[1] for k in before if k.startswith("bert/")
             and not np.array_equal(before[k], after[k])}
  assert changed == {"embeddings"}


def test_scalar_mix_with_one_hot_weights_is_that_layer():
  """softmax(w) one-hot and scale 1: the mix is the chosen layer itself, so the tagger's
  logits equal those of a tagger reading that layer alone."""
  rng = np.random.default_rng(0)
  layers = [jnp.asarray(rng.normal(size=(2, 5, 16)), jnp.float32) for _ in range(4)]
  one_hot = {"weights": jnp.array([-1e9, -1e9, 0.0, -1e9]), "scale": jnp.float32(1.0)}
  mixed = heads.ScalarMix().apply({"params": one_hot}, layers)
  np.testing.assert_array_equal(mixed, layers[2])
  default = heads.ScalarMix().init(jax.random.key(0), layers)["params"]  # the mean at first
  np.testing.assert_allclose(heads.ScalarMix().apply({"params": default}, layers),
                             sum(layers) / 4, rtol=1e-6)
  batch = _batch()
  inputs = [batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")]
  mix = BertForTokenClassification(TINY, 9, feature_layers=(0, 1, 2, 3),
                                   feature_mix="scalar_mix")
  params = mix.init(jax.random.key(0), inputs[0])["params"]
  params = {**params, "scalar_mix": one_hot}  # layer 2 of hidden_states
  alone = BertForTokenClassification(TINY, 9, feature_layers=(2,))
  np.testing.assert_array_equal(
      mix.apply({"params": params}, *inputs).logits,
      alone.apply({"params": {k: v for k, v in params.items() if k != "scalar_mix"}},
                  *inputs).logits)


def test_bilstm_tagger_trains_on_a_frozen_encoder():
  """Two BiLSTM layers of H per direction read the concatenated layers; the loss falls."""
  config = _config(freeze_encoder=True, feature_layers="-2,-1", feature_head="bilstm")
  _, before, after, losses, _ = _train(config, num_steps=6)
  assert before["bilstm/forward_0/cell/ii/kernel"].shape == (32, 16)  # 2 layers x H -> H
  assert before["bilstm/backward_1/cell/ii/kernel"].shape == (32, 16)  # 2 directions x H
  assert after["classifier/dense/kernel"].shape == (32, 9)
  assert not np.array_equal(before["bilstm/forward_1/cell/hf/kernel"],
                            after["bilstm/forward_1/cell/hf/kernel"])
  assert losses[-1] < losses[0] - 0.1, losses


def test_bilstm_restarts_at_each_segment():
  """A row holding two examples gives each the outputs it has alone, padded (each
  direction's state starts at zero at the example's first token, read in that direction)."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(7, 4)).astype(np.float32)
  rows = np.zeros((3, 7, 4), np.float32)
  rows[0], rows[1, :3], rows[2, :2] = x, x[:3], x[3:5]  # packed; each example alone
  segments = jnp.array([[1, 1, 1, 2, 2, 0, 0], [1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]])
  lstm = heads.BiLSTM(3)
  params = lstm.init(jax.random.key(0), rows, segments)
  out = np.asarray(lstm.apply(params, rows, segments))
  np.testing.assert_allclose(out[0, :3], out[1, :3], atol=1e-6)
  np.testing.assert_allclose(out[0, 3:5], out[2, :2], atol=1e-6)
  assert np.abs(out[0, 3:5] - lstm.apply(params, rows[:1], jnp.ones((1, 7), jnp.int32))[
      0, 3:5]).max() > 1e-3  # one segment: the second example would see the first


def test_segment_lstm_is_flax_lstm_cell_with_its_parameters():
  """SegmentLSTM's hoisted input projection is nn.LSTMCell's arithmetic: the same parameter
  tree from the same key, and the same outputs as the cell stepped token by token."""
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(size=(2, 6, 5)), jnp.float32)
  for reverse in (False, True):
    lstm = heads.SegmentLSTM(4, reverse=reverse)
    params = lstm.init(jax.random.key(0), x, jnp.ones((2, 6), jnp.int32))["params"]
    cell = nn.LSTMCell(4)
    reference = cell.init(jax.random.key(0), cell.initialize_carry(
        jax.random.key(1), x[:, 0].shape), x[:, 0])["params"]
    assert jax.tree.structure(reference) == jax.tree.structure(params["cell"])
    carry, outputs = (jnp.zeros((2, 4)), jnp.zeros((2, 4))), {}
    for t in (reversed(range(6)) if reverse else range(6)):
      carry, outputs[t] = cell.apply({"params": params["cell"]}, carry, x[:, t])
    np.testing.assert_allclose(lstm.apply({"params": params}, x, jnp.ones((2, 6), jnp.int32)),
                               np.stack([outputs[t] for t in range(6)], axis=1), atol=1e-6)


@pytest.mark.parametrize("fields,message", [
    ({"feature_layers": "-1", "feature_mix": "sum"},
     r"config.feature_mix='sum': expected one of \['concat', 'scalar_mix'\]"),
    ({"feature_layers": "-1", "feature_head": "gru"},
     r"config.feature_head='gru': expected one of \['bilstm', 'linear'\]"),
    ({"feature_head": "bilstm"},
     r"config.feature_head='bilstm' reads config.feature_layers, which is empty"),
    ({"feature_mix": "scalar_mix"},
     r"config.feature_mix='scalar_mix' reads config.feature_layers, which is empty"),
    ({"trainable_layers": "-1"},
     r"config.trainable_layers='-1': names the layers that train in a frozen encoder; set "
     r"config.freeze_encoder=true"),
    ({"freeze_encoder": True, "trainable_layers": "top"},
     r"config.trainable_layers='top': expected comma-separated layer indices"),
])
def test_bad_head_options_are_one_line(fields, message):
  for task, config in ((ConllTask, _config()), (GlueTask, glue.get_config("runlocal=True"))):
    config.update(fields)
    with pytest.raises(ValueError, match=message):
      task(config, TINY).model_spec()


def test_trainable_layers_out_of_range_or_split_by_scan_are_refused():
  with pytest.raises(ValueError, match=r"config.trainable_layers=4: the encoder's depths are "
                     r"0 \(embeddings\) .. 3 \(its layers\), or -4 .. -1 from the top"):
    _train(_config(freeze_encoder=True, trainable_layers="4"), num_steps=1)
  task = ConllTask(_config(), TINY.replace(scan_layers=True))
  params = nn.unbox(task.build_model().init(jax.random.key(0), _batch()["input_ids"])["params"])
  with pytest.raises(ValueError, match=r"config.trainable_layers=-1: bert/encoder/layers/"
                     r"layer/.* stacks layers 1-3 \(config.model.scan_layers\)"):
    optim.frozen_labels(params, (-1,))
  labels = optim.frozen_labels(params, (1, 2, 3))  # the whole stack: one label
  assert flatten(labels)["bert/encoder/layers/layer/attention/query/kernel"] == "trained"
  assert flatten(labels)["bert/embeddings/word_embeddings/embedding"] == "frozen"
