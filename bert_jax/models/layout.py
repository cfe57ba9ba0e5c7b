"""Unrolled (`encoder/layer_0..L-1`) <-> scanned (`encoder/layers/layer`, stacked) params.

Checkpoints and converters use the unrolled layout; a model with `scan_layers=True`
needs the stacked one. These functions find every `encoder` subtree in a param tree.
`first`: the leading layers that stay unrolled under scan (`Family.unrolled_layers`:
ModernBERT's layer 0); layers first .. L-1 are stacked, layer first + i at index i.
"""
import jax
import jax.numpy as jnp

from bert_jax.models.families import family_of


def _map_encoders(params, fn):
  if not isinstance(params, dict):
    return params
  return {k: (fn(v) if k == "encoder" else _map_encoders(v, fn)) for k, v in params.items()}


def stack_layers(params, num_layers: int, first: int = 0):
  """encoder/layer_i/... (i >= first) -> encoder/layers/layer/... with a leading [L - first]
  axis; layer_0 .. layer_{first - 1} stay as they are."""
  def stack(encoder):
    names = [f"layer_{i}" for i in range(first, num_layers)]
    if "layers" in encoder or not any(name in encoder for name in names):
      return encoder  # stacked already, or one shared layer (ALBERT's), or nothing to stack
    rest = {k: v for k, v in encoder.items() if k not in names}  # e.g. final_layer_norm
    layers = [encoder[name] for name in names]
    return {"layers": {"layer": jax.tree.map(lambda *xs: jnp.stack(xs), *layers)}, **rest}
  return _map_encoders(params, stack)


def unstack_layers(params, num_layers: int, first: int = 0):
  """encoder/layers/layer/... [L - first, ...] -> encoder/layer_i/... (i >= first)."""
  def unstack(encoder):
    if "layers" not in encoder:
      return encoder
    stacked = encoder["layers"]["layer"]
    rest = {k: v for k, v in encoder.items() if k != "layers"}
    return {**{f"layer_{first + i}": jax.tree.map(lambda x, i=i: x[i], stacked)
               for i in range(num_layers - first)}, **rest}
  return _map_encoders(params, unstack)


def stacked_layout(config) -> tuple[int, int]:
  """(num_layers, first) of a config, the two layout arguments after the params."""
  return config.num_hidden_layers, family_of(config).unrolled_layers
