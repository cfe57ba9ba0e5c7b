"""The logical axes every param of a pretraining model carries, checked against the rules."""
import jax
import numpy as np
from flax import linen as nn

from bert_jax.run import sharding
from bert_jax.models.headed import BertForPreTraining


def ruled_partition_specs(config) -> dict:
  """{param path: logical axes} of the config's pretraining model, after checking that every
  param carries axes, each a name the rules map (or None), and every kernel and embedding
  table an `embed` axis (split over fsdp)."""
  from bert_jax.weights import mapping
  boxed = jax.eval_shape(lambda: BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  specs = mapping.flatten(nn.get_partition_spec(boxed))
  assert len(specs) == len(mapping.flatten(nn.unbox(boxed)))  # every param is boxed
  ruled = {name for name, _ in sharding.rules_from_config(None)}
  for path, spec in specs.items():
    assert all(name is None or name in ruled for name in spec), (path, spec)
    if path.endswith("kernel") or path.endswith("embedding"):
      assert "embed" in spec, (path, spec)
  return specs
