"""The attention-guidance pretraining loss: targets, values, config errors, and that it
trains the guided heads (through PretrainingTask, as the trainer calls it)."""
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from bert_jax.models.config import BertConfig
from bert_jax.models.layout import stack_layers
from bert_jax.pretrain import attention_guidance
from bert_jax.pretrain import pipeline
from bert_jax.pretrain.task import PretrainingTask

# Row 0: [CLS] a b [SEP] pad pad; row 1: six real tokens.
MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.int32)
SMALL = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=32, max_position_embeddings=16)


def guidance_config(**fields):
  config = ml_collections.ConfigDict({"objectives": "mlm,nsp",
                                      "data": pipeline.default_data_config()})
  config.attention_guidance = attention_guidance.default_config()
  config.attention_guidance.update(fields)
  return config


def make(patterns="previous,next,first", layers="", num_layers=2, num_heads=4):
  return attention_guidance.from_config(
      guidance_config(weight=1.0, patterns=patterns, layers=layers), num_layers, num_heads)


def test_targets_skip_cls_last_token_and_padding():
  index, valid = make().targets(jnp.asarray(MASK))
  np.testing.assert_array_equal(index[0], [0, 0, 1, 2, 3, 4])  # previous (clipped at 0)
  np.testing.assert_array_equal(index[1], [1, 2, 3, 4, 5, 5])  # next (clipped at T-1)
  np.testing.assert_array_equal(index[2], [0] * 6)              # first
  np.testing.assert_array_equal(valid[0], [[0, 1, 1, 1, 0, 0], [0, 1, 1, 1, 1, 1]])
  np.testing.assert_array_equal(valid[1], [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]])
  np.testing.assert_array_equal(valid[2], [[1, 1, 1, 1, 0, 0], [1] * 6])
  # (3 + 5) + (3 + 5) + (4 + 6) = 26 query rows per guided layer, 2 layers.
  assert float(make().count(jnp.asarray(MASK))) == 52.0


def test_loss_sum_is_the_negative_log_weight_on_each_target():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 2, 4, 6, 6))  # [L, B, N, F, T]
  probs = jax.nn.softmax(jnp.asarray(logits + np.where(MASK[None, :, None, None, :], 0, -1e9)),
                         axis=-1)
  got = float(make(layers="1").loss_sum([probs[0], probs[1]], jnp.asarray(MASK)))
  want = 0.0
  p = np.asarray(probs[1])
  for b in range(2):
    real = int(MASK[b].sum())
    for i in range(real):
      if i >= 1:
        want -= np.log(p[b, 0, i, i - 1])
      if i + 1 < real:
        want -= np.log(p[b, 1, i, i + 1])
      want -= np.log(p[b, 2, i, 0])
  np.testing.assert_allclose(got, want, rtol=1e-5)
  # Attention exactly on the targets costs nothing.
  index, _ = make().targets(jnp.asarray(MASK))
  exact = jnp.stack([jax.nn.one_hot(index[k], 6) for k in range(3)] + [jnp.eye(6)])
  exact = jnp.broadcast_to(exact[None], (2, 4, 6, 6))
  assert float(make().loss_sum([exact, exact], jnp.asarray(MASK))) == pytest.approx(0.0, abs=1e-6)


def test_config_errors_and_off_switch():
  assert attention_guidance.from_config(guidance_config(), 2, 4) is None  # weight 0
  assert attention_guidance.from_config(ml_collections.ConfigDict(), 2, 4) is None
  with pytest.raises(ValueError, match=r"patterns='previous,sideways'.*comma-separated"):
    make(patterns="previous,sideways")
  with pytest.raises(ValueError, match="has 3 patterns but the model has 2 heads"):
    make(num_heads=2)
  with pytest.raises(ValueError, match=r"layers='0,2': layers \[2\] do not exist"):
    make(layers="0,2")
  assert make(layers="1").layers == (1,) and make().layers == (0, 1)


def _batch(rng, batch=4, seq=12, predictions=3):
  ids = rng.integers(5, SMALL.vocab_size, size=(batch, seq)).astype(np.int32)
  mask = np.ones((batch, seq), np.int32)
  mask[0, 8:] = 0
  return {"input_ids": jnp.asarray(ids), "token_type_ids": jnp.zeros_like(ids),
          "attention_mask": jnp.asarray(mask),
          "masked_lm_positions": jnp.tile(jnp.arange(1, 1 + predictions), (batch, 1)),
          "masked_lm_ids": jnp.asarray(ids[:, 1:1 + predictions]),
          "masked_lm_weights": jnp.ones((batch, predictions), jnp.float32),
          "next_sentence_labels": jnp.zeros((batch,), jnp.int32)}


@pytest.mark.slow
def test_guidance_trains_the_guided_heads_and_stays_out_of_eval():
  task = PretrainingTask(guidance_config(weight=1.0, patterns="previous,next"), SMALL)
  model = task.build_model()
  batch = _batch(np.random.default_rng(0))
  params = nn.unbox(model.init(jax.random.key(0), batch["input_ids"])["params"])

  def loss_fn(p, rng):
    forward = task.forward(model, p, batch, deterministic=False, rng=rng)
    sums = task.loss_sums(forward, batch)
    return task.loss(sums, task.denominators(batch)), sums

  _, sums = loss_fn(params, jax.random.key(1))
  metrics = task.metrics(sums, task.denominators(batch))
  # Near-uniform attention at init: the term is about log(real keys) per row.
  assert 2.0 < float(metrics["attention_guidance_loss"]) < 2.6
  assert float(metrics["loss"]) == pytest.approx(
      float(metrics["mlm_loss"] + metrics["nsp_loss"]), rel=1e-6)  # `loss` leaves it out

  tx = optax.adam(3e-2)
  opt_state = tx.init(params)

  @jax.jit
  def step(p, o, rng):
    grads, _ = jax.grad(loss_fn, has_aux=True)(p, rng)
    updates, o = tx.update(grads, o, p)
    return optax.apply_updates(p, updates), o

  for i in range(40):
    params, opt_state = step(params, opt_state, jax.random.key(i))
  _, sums = loss_fn(params, jax.random.key(99))
  assert float(task.metrics(sums, task.denominators(batch))["attention_guidance_loss"]) < 0.3

  # Eval forwards are plain BERT: no guidance term, no intermediates.
  plain = task.forward(model, params, batch, deterministic=True)
  assert plain.guidance_loss is None
  assert "attention_guidance_loss" not in task.metrics(task.loss_sums(plain, batch),
                                                       task.denominators(batch))


def test_scanned_layers_give_the_same_guidance_loss():
  batch = _batch(np.random.default_rng(1))
  config = guidance_config(weight=1.0, patterns="previous,next,first", layers="1")
  no_dropout = SMALL.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  values = []
  for scan in (False, True):
    task = PretrainingTask(config, no_dropout.replace(scan_layers=scan))
    model = task.build_model()
    params = nn.unbox(PretrainingTask(config, no_dropout).build_model().init(
        jax.random.key(0), batch["input_ids"])["params"])
    if scan:
      params = stack_layers(params, SMALL.num_hidden_layers)
    forward = task.forward(model, params, batch, deterministic=False, rng=jax.random.key(2))
    values.append(float(forward.guidance_loss))
  np.testing.assert_allclose(values[0], values[1], rtol=1e-5)


def test_a_fused_attention_with_guidance_names_the_guidance_and_how_to_turn_it_off():
  """Splash / XLA attention give no probabilities to guide: the task refuses at build time,
  naming the auxiliary loss's field (the cause) before the attention's."""
  with pytest.raises(ValueError) as refused:
    PretrainingTask(guidance_config(weight=0.1, patterns="previous"),
                    dataclasses.replace(SMALL, attention_impl="splash"))
  message = str(refused.value)
  assert message.startswith("config.attention_guidance.weight=0.1")
  assert "--config.attention_guidance.weight=0" in message and "'splash'" in message
  PretrainingTask(guidance_config(weight=0.0), dataclasses.replace(SMALL, attention_impl="splash"))
