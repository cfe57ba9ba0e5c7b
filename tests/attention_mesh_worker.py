"""Splash attention under shard_map on meshes of 8 simulated devices against the einsum path
on one device: a tiny BERT's sequence output and parameter gradients, padded rows and
packed rows (segment ids); prints {mesh: {rows: [output, grads max |diff| / max |einsum's|]}}
as JSON. Padded rows: a key-padding mask; packed rows: 1-3 examples a row (segment ids), some
rows ending in padding.

  XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/attention_mesh_worker.py

Params are placed by the logical-axis rules (`sharding.state_shardings`, DEFAULT_RULES),
the batch over the batch axes; off TPU the kernel runs in its interpreter.
tests/test_attention.py checks the differences.
"""
import json
import os
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_jax.run import sharding  # noqa: E402
from bert_jax.models.bert import BertModel  # noqa: E402
from bert_jax.models.config import BertConfig  # noqa: E402

MESHES = {"data": (8, 1, 1), "fsdp": (1, 8, 1), "tensor": (2, 1, 4)}
# Rows compared on each mesh (each compile of the interpreted kernel costs seconds).
ROWS = {"data": ("padded", "packed"), "fsdp": ("packed",), "tensor": ("packed",)}
BATCH, LENGTH = 8, 128


def _config(impl):
  return BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=LENGTH, attention_impl=impl,
                    attention_probs_dropout_prob=0.0)


def _batches():
  rng = np.random.default_rng(0)
  ids = rng.integers(1, 64, size=(BATCH, LENGTH)).astype(np.int32)
  lengths = rng.integers(1, LENGTH + 1, size=BATCH)
  padded = (np.arange(LENGTH)[None] < lengths[:, None]).astype(np.int32)
  segments = np.zeros((BATCH, LENGTH), np.int32)  # 1-3 examples a row, then padding
  for row in range(BATCH):
    cuts = np.sort(rng.choice(np.arange(1, LENGTH), size=3, replace=False))
    segments[row, :cuts[0]], segments[row, cuts[0]:cuts[1]] = 1, 2
    segments[row, cuts[1]:cuts[2]] = 3 if row % 2 else 0
  positions = np.zeros_like(segments)
  for row in range(BATCH):
    for example in range(1, 4):
      at = np.flatnonzero(segments[row] == example)
      positions[row, at] = np.arange(len(at))
  packed = {"mask": (segments > 0).astype(np.int32), "segment_ids": segments,
            "positions": positions}
  return {"padded": (ids, {"mask": padded}), "packed": (ids, packed)}


def _loss_and_grads(model, params, ids, rows):
  def loss(params):
    packing = {k: rows[k] for k in ("segment_ids", "positions") if k in rows}
    out = model.apply({"params": params}, ids, None, rows["mask"], packing=packing or None)
    real = rows["mask"][..., None].astype(jnp.float32)
    return jnp.sum(jnp.sin(out.sequence_output) * real), out.sequence_output * real
  (_, output), grads = jax.value_and_grad(loss, has_aux=True)(params)
  return output, grads


def _max_diff(a, b):
  """max |a - b| over the leaves, relative to max |b|."""
  diff = max(float(np.abs(np.asarray(x) - np.asarray(y)).max())
             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
  return diff / max(float(np.abs(np.asarray(y)).max()) for y in jax.tree.leaves(b))


def main():
  ids0 = jnp.ones((1, LENGTH), jnp.int32)
  boxed = BertModel(_config("einsum")).init(jax.random.key(0), ids0)["params"]
  params = nn.unbox(boxed)
  reference = {name: _loss_and_grads(BertModel(_config("einsum")), params, ids, rows)
               for name, (ids, rows) in _batches().items()}
  splash = BertModel(_config("splash"))
  result = {}
  start = time.perf_counter()
  for mesh_name, shape in MESHES.items():
    mesh = sharding.make_mesh(dict(zip(sharding.MESH_AXES, shape)))
    rules = sharding.DEFAULT_RULES
    param_shardings = sharding.state_shardings(boxed, mesh, rules)
    rows_sharding = sharding.batch_sharding(mesh, rules)
    step = jax.jit(lambda p, i, r: _loss_and_grads(splash, p, i, r),
                   in_shardings=(param_shardings, rows_sharding, rows_sharding))
    result[mesh_name] = {}
    for name in ROWS[mesh_name]:
      ids, rows = _batches()[name]
      with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        output, grads = step(params, ids, rows)
      ref_output, ref_grads = reference[name]
      result[mesh_name][name] = [_max_diff(output, ref_output), _max_diff(grads, ref_grads)]
    print(f"{mesh_name}: {time.perf_counter() - start:.1f}s", file=sys.stderr)
  print(json.dumps(result))


if __name__ == "__main__":
  main()
