"""Trains a tiny ALBERT (one shared layer, MLM H -> E + SOP), ELECTRA discriminator, RoBERTa
and DistilBERT (MLM) a few SGD steps on the (data, fsdp, tensor) = (2,2,2) mesh of 8 simulated devices and on 1
device; prints {model: {mesh: [loss per step]}} as JSON.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/family_mesh_worker.py

Params are placed by the logical-axis rules (`sharding.state_shardings`, DEFAULT_RULES),
the batch over the batch axes, dropout on; tests/test_sharding.py compares the meshes'
losses with the one device's.
"""
import json
import os
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_jax.run import sharding  # noqa: E402
from bert_jax.models.config import BertConfig  # noqa: E402
from bert_jax.models.electra import BertForReplacedTokenDetection  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402

MESHES = ("1,1,1", "2,2,2")
STEPS = 3
BATCH, LENGTH = 8, 12
_SMALL = dict(vocab_size=96, hidden_size=32, embedding_size=16, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)
MODELS = {
    "albert_pretraining": BertForPreTraining(BertConfig(
        family="albert", layer_sharing="all", hidden_act="gelu_tanh", **_SMALL)),
    "electra_discriminator": BertForReplacedTokenDetection(BertConfig(family="electra",
                                                                      **_SMALL)),
    "roberta_pretraining": BertForPreTraining(BertConfig(
        family="roberta", type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5,
        **{**_SMALL, "embedding_size": None})),
    "distilbert_pretraining": BertForPreTraining(BertConfig(
        family="distilbert", type_vocab_size=0, **{**_SMALL, "embedding_size": None})),
}


def _batch():
  keys = jax.random.split(jax.random.key(7), 3)
  ids = jax.random.randint(keys[0], (BATCH, LENGTH), 1, _SMALL["vocab_size"])
  lengths = jax.random.randint(keys[1], (BATCH, 1), 3, LENGTH + 1)
  mask = (jnp.arange(LENGTH)[None] < lengths).astype(jnp.int32)
  labels = jax.random.randint(keys[2], (BATCH, LENGTH), 0, 2)
  return {"input_ids": ids * mask, "attention_mask": mask,
          "token_type_ids": (jnp.arange(LENGTH)[None] >= LENGTH // 2) * mask,
          "labels": labels * mask}


def _loss(model, params, batch, rng):
  out = model.apply({"params": params}, batch["input_ids"], batch["token_type_ids"],
                    batch["attention_mask"], deterministic=False, rngs={"dropout": rng})
  weights = batch["attention_mask"].astype(jnp.float32)
  if hasattr(out, "mlm_logits"):  # every token predicts its own id; SOP the row parity
    per_token = optax.softmax_cross_entropy_with_integer_labels(out.mlm_logits,
                                                                batch["input_ids"])
    loss = jnp.sum(per_token * weights) / jnp.sum(weights)
    for logits in out.sentence_logits.values():
      loss += optax.softmax_cross_entropy_with_integer_labels(
          logits, batch["labels"][:, 0]).mean()
    return loss
  per_token = optax.sigmoid_binary_cross_entropy(out.logits, batch["labels"])
  return jnp.sum(per_token * weights) / jnp.sum(weights)


def losses_on(model, mesh_spec: str) -> list[float]:
  shape = dict(zip(sharding.MESH_AXES, map(int, mesh_spec.split(","))))
  devices = jax.devices()[:shape["data"] * shape["fsdp"] * shape["tensor"]]
  mesh = sharding.make_mesh(shape, devices)
  rules = sharding.DEFAULT_RULES
  batch = _batch()
  init = lambda rng: model.init(rng, batch["input_ids"])["params"]  # noqa: E731
  boxed = jax.eval_shape(init, jax.random.key(0))
  param_sharding = sharding.state_shardings(boxed, mesh, rules)
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    params = jax.jit(lambda r: nn.unbox(init(r)), out_shardings=param_sharding)(
        jax.random.key(0))
    batch = jax.device_put(batch, sharding.batch_sharding(mesh, rules))

    @jax.jit
    def step(params, rng):
      loss, grads = jax.value_and_grad(lambda p: _loss(model, p, batch, rng))(params)
      return jax.tree.map(lambda p, g: p - 0.5 * g, params, grads), loss

    losses = []
    for i in range(STEPS):
      params, loss = step(params, jax.random.key(100 + i))
      losses.append(float(loss))
  return losses


def main():
  assert jax.device_count() == 8, "run with --xla_force_host_platform_device_count=8"
  losses = {}
  for name, model in MODELS.items():
    for mesh in MESHES:
      start = time.time()
      losses.setdefault(name, {})[mesh] = losses_on(model, mesh)
      print(f"{name} ({mesh}): {time.time() - start:.1f} s", file=sys.stderr, flush=True)
  print(json.dumps(losses))


if __name__ == "__main__":
  main()
