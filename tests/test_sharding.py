"""Param shardings from the logical-axis rules, on abstract meshes (no devices needed)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh, AxisType

from bert_jax.run import sharding
from bert_jax.models.config import config_for_size
from bert_jax.models.headed import BertForPreTraining


def _abstract_params(size):
  model = BertForPreTraining(config_for_size(size))
  return jax.eval_shape(lambda r: model.init(r, jnp.zeros((1, 8), jnp.int32))["params"],
                        jax.random.key(0))


def _mesh(shape):
  return AbstractMesh(shape, sharding.MESH_AXES, axis_types=(AxisType.Auto,) * 3)


@pytest.mark.parametrize("shape, unsplit", [
    ((2, 1, 4), [("['bert']['embeddings']['word_embeddings']['embedding']: dim 0 (size "
                  "30522) not split over tensor"),
                 "['mlm_head']['output_bias']: dim 0 (size 30522) not split over tensor"]),
    ((1, 4, 2), []),
    ((1, 8, 1), []),
])
def test_base_shardings_divide_every_dimension(shape, unsplit):
  boxed = _abstract_params("base")
  mesh = _mesh(shape)
  shardings = sharding.state_shardings(boxed, mesh, sharding.DEFAULT_RULES)
  for x, s in zip(jax.tree.leaves(nn.unbox(boxed)), jax.tree.leaves(shardings)):
    for size, axes in zip(x.shape, s.spec):
      axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
      assert size % int(np.prod([mesh.shape[a] for a in axes])) == 0
  assert sharding.unsplit_dimensions(boxed, shardings, mesh, sharding.DEFAULT_RULES) == unsplit


def test_a_dimension_keeps_the_axes_prefix_that_divides_it():
  mesh = _mesh((2, 4, 1))
  # embed over (data, fsdp) = 8 ways does not divide 6; data alone (2) does.
  rules = (("embed", ("data", "fsdp")), ("vocab", None), ("mlp", None), ("heads", None),
           ("kv", None), ("layers", None))
  boxed = {"w": nn.Partitioned(jax.ShapeDtypeStruct((6, 16), jnp.float32), ("embed", "mlp"))}
  shardings = sharding.state_shardings(boxed, mesh, rules)
  assert shardings["w"].spec == jax.sharding.PartitionSpec("data", None)


# --- ALBERT and ELECTRA: every kernel named, the meshes give the one-device losses -------

@pytest.mark.parametrize("size, sharing, model", [
    ("albert-base-v2", "all", "pretraining"), ("albert-base-v2", "attention", "pretraining"),
    ("albert-base-v2", "ffn", "pretraining"), ("electra-small", "none", "pretraining"),
    ("electra-small", "none", "replaced_token_detection")])
def test_every_albert_and_electra_param_has_logical_axes(size, sharing, model):
  """Each param (the E-wide tables, the E -> H projection, the H -> E MLM transform, the
  shared layer, the RTD head) names one logical axis per dimension; on fsdp=8 every
  dimension the rules ask to split divides."""
  from bert_jax.models import specs
  config = config_for_size(size, layer_sharing=sharing)
  module = specs.build(config, {"headed_model": model})
  boxed = jax.eval_shape(lambda r: module.init(r, jnp.zeros((1, 8), jnp.int32))["params"],
                         jax.random.key(0))
  leaves = jax.tree.leaves(boxed, is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert all(isinstance(x, nn.Partitioned) and len(x.names) == x.value.ndim for x in leaves)
  mesh = _mesh((1, 8, 1))
  shardings = sharding.state_shardings(boxed, mesh, sharding.DEFAULT_RULES)
  assert sharding.unsplit_dimensions(boxed, shardings, mesh, sharding.DEFAULT_RULES) == []


@pytest.mark.slow
def test_albert_electra_roberta_distilbert_on_8_devices_give_the_one_device_losses():
  """tests/family_mesh_worker.py: 3 SGD steps (dropout on) of a tiny ALBERT (one shared
  layer), ELECTRA discriminator, RoBERTa and DistilBERT on the (2,2,2) mesh of 8 simulated devices (data, fsdp
  and tensor all split) equal the 1-device losses (1e-5)."""
  import json
  import os
  import subprocess
  import sys
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  # LLVM optimisation off for both meshes: compiling is most of the worker's time (as in
  # tests/test_modernbert.py's mesh test).
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8 "
                                    "--xla_backend_optimization_level=0",
         "JAX_PLATFORMS": "cpu"}
  result = subprocess.run([sys.executable, "tests/family_mesh_worker.py"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  losses = json.loads(result.stdout.strip().splitlines()[-1])
  assert set(losses) == {"albert_pretraining", "electra_discriminator", "roberta_pretraining",
                         "distilbert_pretraining"}
  for name, by_mesh in losses.items():
    one = np.asarray(by_mesh.pop("1,1,1"))
    assert one[-1] < one[0], (name, one)  # it learns
    for mesh, values in by_mesh.items():
      np.testing.assert_allclose(values, one, rtol=1e-5, err_msg=f"{name} on ({mesh})")
