"""Device mesh and the logical-axis rules table (the only place physical axes appear).

The model names every param and activation axis logically (embed, mlp, heads, kv, vocab,
layers; activation_batch, ...). `DEFAULT_RULES` maps those names to the mesh axes
`data`, `fsdp`, `tensor`: batch over data x fsdp, params' embed axis over fsdp (ZeRO-3
style), mlp/heads/vocab over tensor (Megatron style). Configs can override the table.
"""
from collections.abc import Mapping, Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bert_jax.models.layers import divisible_axes

MESH_AXES = ("data", "fsdp", "tensor")
# Auto axes: XLA propagates shardings from the in/out shardings and the model's
# logical constraints (the jit + NamedSharding style, what pjit became).
_AUTO = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)

# (logical name, mesh axis or axes or None), first match wins per logical name.
DEFAULT_RULES: tuple[tuple[str, str | tuple[str, ...] | None], ...] = (
    ("activation_batch", ("data", "fsdp")),
    ("activation_length", None),
    ("activation_embed", None),
    ("activation_heads", "tensor"),
    ("activation_kv", None),
    ("activation_mlp", "tensor"),
    ("activation_vocab", "tensor"),
    ("embed", "fsdp"),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("kv", None),
    ("vocab", "tensor"),
    ("layers", None),
)


def mesh_shape(sizes: Mapping[str, int], num_devices: int) -> tuple[int, int, int]:
  """Resolves one -1 entry to the remaining devices and checks the product."""
  shape = [int(sizes.get(axis, 1)) for axis in MESH_AXES]
  free = [i for i, s in enumerate(shape) if s == -1]
  if len(free) > 1:
    raise ValueError(f"config.mesh: at most one axis may be -1, got {dict(zip(MESH_AXES, shape))}")
  known = int(np.prod([s for s in shape if s != -1]))
  if free:
    if num_devices % known:
      raise ValueError(f"config.mesh: {num_devices} devices are not divisible by {known}")
    shape[free[0]] = num_devices // known
  if int(np.prod(shape)) != num_devices:
    raise ValueError(f"config.mesh: data*fsdp*tensor = {int(np.prod(shape))} but there are "
                     f"{num_devices} devices ({dict(zip(MESH_AXES, shape))})")
  return tuple(shape)


def make_mesh(sizes: Mapping[str, int], devices: Sequence[jax.Device] | None = None) -> Mesh:
  """A (data, fsdp, tensor) mesh over all (or the given) devices."""
  devices = list(devices if devices is not None else jax.devices())
  shape = mesh_shape(sizes, len(devices))
  if devices == list(jax.devices()):
    return jax.make_mesh(shape, MESH_AXES, axis_types=_AUTO)
  return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=_AUTO)


def rules_from_config(rules) -> tuple[tuple[str, object], ...]:
  """Config rules (list of [name, axis]) -> the tuple form flax expects; None = defaults."""
  if not rules:
    return DEFAULT_RULES
  out = []
  for entry in rules:
    name, axis = entry
    out.append((name, tuple(axis) if isinstance(axis, (list, tuple)) else axis))
  return tuple(out)


def state_shardings(boxed_tree, mesh: Mesh, rules):
  """A tree of logically partitioned (boxed) shapes -> NamedShardings on `mesh`.

  A dimension that its mesh axes do not divide (BERT's vocab of 30,522 over tensor=4)
  keeps the longest prefix of those axes that does divide it (often none: replicated
  along them) instead of failing; `unsplit_dimensions` lists where that happened.
  """
  shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed_tree), mesh, rules)
  # Leaves without a shape (optax's MaskedNode for frozen params) keep their sharding.
  return jax.tree.map(lambda s, x: _fit(s, x.shape) if hasattr(x, "shape") else s,
                      shardings, nn.unbox(boxed_tree))


def _fit(named: NamedSharding, shape: Sequence[int]) -> NamedSharding:
  spec = []
  for size, axes in zip(shape, tuple(named.spec) + (None,) * (len(shape) - len(named.spec))):
    axes = divisible_axes(axes, size, named.mesh.shape)
    spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return NamedSharding(named.mesh, PartitionSpec(*spec))


def unsplit_dimensions(boxed_tree, shardings, mesh: Mesh, rules) -> list[str]:
  """'path: dim D (size S) not split over AXES' for every dimension `state_shardings` left
  less split than the rules asked."""
  asked = nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed_tree), mesh, rules)
  notes = []
  flat = jax.tree_util.tree_flatten_with_path(nn.unbox(boxed_tree))[0]
  for (path, x), want, got in zip(flat, jax.tree.leaves(asked), jax.tree.leaves(shardings)):
    for dim, (a, b) in enumerate(zip(tuple(want.spec), tuple(got.spec) + (None,) * 9)):
      if a != b:
        notes.append(f"{jax.tree_util.keystr(path)}: dim {dim} (size {x.shape[dim]}) not "
                     f"split over {a}")
  return notes


def batch_sharding(mesh: Mesh, rules) -> NamedSharding:
  """Leading (batch) axis over the mesh axes that activation_batch maps to."""
  axes = dict(rules).get("activation_batch")
  return NamedSharding(mesh, PartitionSpec(axes))


def global_batch(local_batch: Mapping[str, np.ndarray], mesh: Mesh, rules) -> dict:
  """Per-process numpy batch -> global jax Arrays sharded over the batch axes."""
  sharding = batch_sharding(mesh, rules)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}
