"""Param shardings from the logical-axis rules, on abstract meshes (no devices needed)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh, AxisType

from bert_jax import sharding
from bert_jax.models.config import config_for_size
from bert_jax.models.task_models import BertForPreTraining


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
