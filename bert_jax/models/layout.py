"""Unrolled (`encoder/layer_0..L-1`) <-> scanned (`encoder/layers/layer`, stacked) params.

Checkpoints and converters use the unrolled layout; a model with `scan_layers=True`
needs the stacked one. These functions find every `encoder` subtree in a param tree.
"""
import jax
import jax.numpy as jnp


def _map_encoders(params, fn):
  if not isinstance(params, dict):
    return params
  return {k: (fn(v) if k == "encoder" else _map_encoders(v, fn)) for k, v in params.items()}


def stack_layers(params, num_layers: int):
  """encoder/layer_i/... -> encoder/layers/layer/... with a leading [L] axis."""
  def stack(encoder):
    if "layers" in encoder:
      return encoder
    names = [f"layer_{i}" for i in range(num_layers)]
    rest = {k: v for k, v in encoder.items() if k not in names}  # e.g. final_layer_norm
    layers = [encoder[name] for name in names]
    return {"layers": {"layer": jax.tree.map(lambda *xs: jnp.stack(xs), *layers)}, **rest}
  return _map_encoders(params, stack)


def unstack_layers(params, num_layers: int):
  """encoder/layers/layer/... [L, ...] -> encoder/layer_i/..."""
  def unstack(encoder):
    if "layers" not in encoder:
      return encoder
    stacked = encoder["layers"]["layer"]
    rest = {k: v for k, v in encoder.items() if k != "layers"}
    return {**{f"layer_{i}": jax.tree.map(lambda x, i=i: x[i], stacked)
               for i in range(num_layers)}, **rest}
  return _map_encoders(params, unstack)
