"""The subprocess half of tests/test_modernbert.py's mesh test (JAX fixes its device count
at start-up): a tiny ModernBERT's MLM loss and gradient norm on one device and on each
(data, fsdp, tensor) mesh of 8 simulated devices, params sharded by the logical-axis rules.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/modernbert_mesh_worker.py
prints one JSON line: {"1,1,1": [loss, grad_norm], "2,2,2": [...], "1,4,2": [...]}.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from bert_jax.run import sharding  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402

MESHES = ("1,1,1", "2,2,2", "1,4,2")


def main():
  # Layers 0 global, 1-2 local (window +-4) on a 16-token batch; vocab and heads divide 2.
  config = config_for_size("modernbert-tiny", vocab_size=96, hidden_size=32, intermediate_size=48,
                           num_attention_heads=4, local_attention=8)
  model = BertForPreTraining(config)
  rng = np.random.default_rng(0)
  ids = rng.integers(4, 96, size=(8, 16)).astype(np.int32)
  mask = (np.arange(16)[None] < rng.integers(5, 17, size=(8, 1))).astype(np.int32)
  batch = {"ids": ids * mask, "mask": mask, "labels": rng.integers(0, 96, size=(8, 16))}
  boxed = model.init(jax.random.key(0), ids)["params"]
  values = nn.unbox(boxed)  # outside a mesh (unbox constrains to the logical axes)
  abstract = jax.eval_shape(lambda: boxed)

  def loss_fn(params, batch):
    out = model.apply({"params": params}, batch["ids"], None, batch["mask"])
    losses = optax.softmax_cross_entropy_with_integer_labels(out.mlm_logits, batch["labels"])
    return (losses * batch["mask"]).sum() / batch["mask"].sum()

  def loss_and_grad_norm(params, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    return loss, optax.tree.norm(grads)

  results = {}
  for name in MESHES:
    sizes = dict(zip(sharding.MESH_AXES, map(int, name.split(","))))
    devices = jax.devices()[:int(np.prod(list(sizes.values())))]
    mesh = sharding.make_mesh(sizes, devices)
    rules = sharding.DEFAULT_RULES
    params = jax.device_put(values, sharding.state_shardings(abstract, mesh, rules))
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
      placed = jax.device_put(batch, sharding.batch_sharding(mesh, rules))
      loss, norm = jax.jit(loss_and_grad_norm)(params, placed)
    results[name] = [float(loss), float(norm)]
  print(json.dumps(results))


if __name__ == "__main__":
  main()
