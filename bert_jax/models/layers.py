"""Layers every encoder of the family shares: initialisers, LayerNorm, activations, the
attention block (dropout: models/dropout.py), and the logical axis names of activations.

Shape legend (as in google-research/bert):
  B: batch size            T: sequence length (F "from" / T "to" in attention)
  H: hidden size           N: number of attention heads     D: head size (H / N)
  I: intermediate size     V: vocabulary size               L: number of layers

Every kernel carries logical axis names, mapped to mesh axes by the rules table in
`bert_jax.run.sharding`: embed, heads, kv, mlp, vocab, and `layers` for the stacked axis when
`scan_layers` is on; activations use `activation_*` names (batch, length, embed, ...).
Params are float32; activations run in `config.compute_dtype`; softmax and LayerNorm
statistics are computed in float32.
"""
from typing import Optional

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models import dropout as dropout_lib
from bert_jax.models.config import BertConfig

# Added to the attention logits of padding keys; finite, so an all-padding row stays
# finite (uniform) instead of NaN.
_MASK_BIAS = -1e9

# Logical names of activations (params use embed/heads/kv/mlp/vocab; see sharding.py).
ACT_BT = ("activation_batch", "activation_length")
ACT_BTH = ACT_BT + ("activation_embed",)
ACT_BTND = ACT_BT + ("activation_heads", "activation_kv")
ACT_BTI = ACT_BT + ("activation_mlp",)
ACT_BTV = ACT_BT + ("activation_vocab",)


def dense_init(config: BertConfig, axes: tuple[Optional[str], ...]):
  """Truncated normal(std=initializer_range) kernel init carrying logical axis names."""
  return nn.with_logical_partitioning(
      nn.initializers.truncated_normal(config.initializer_range), axes)


def zeros_init(axes: tuple[Optional[str], ...]):
  return nn.with_logical_partitioning(nn.initializers.zeros_init(), axes)


def dense(config: BertConfig, features: int, axes: tuple[Optional[str], ...], name: str):
  """nn.Dense with a bias, float32 params cast to the compute dtype; kernel axes `axes`."""
  return nn.Dense(features, dtype=config.compute_dtype, param_dtype=jnp.float32,
                  kernel_init=dense_init(config, axes), bias_init=zeros_init(axes[-1:]),
                  name=name)


def check_length(config: BertConfig, seq_len: int, first: int = 0) -> None:
  """One line when rows are longer than the model's positions (its position table, or
  ModernBERT's RoPE context length), positions starting at `first`."""
  if first + seq_len > config.max_position_embeddings:
    start = f" less the first position id {first}" if first else ""
    raise ValueError(f"Sequence length {seq_len} exceeds max_position_embeddings="
                     f"{config.max_position_embeddings}{start}")


def layer_norm(config: BertConfig, name: str) -> nn.LayerNorm:
  """LayerNorm in float32 (its output is cast back by the caller); bias if config.norm_bias."""
  return nn.LayerNorm(
      epsilon=config.layer_norm_eps, use_bias=config.norm_bias, dtype=jnp.float32,
      param_dtype=jnp.float32,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
      bias_init=zeros_init(("embed",)), name=name)


def _gelu_erf(x):
  """Exact GELU, x * Phi(x), in its erf form (HF's and PyTorch's). jax.nn.gelu's exact
  form goes through erfc, which XLA on CPU evaluates at about twice erf's cost; the two
  agree to 5e-7."""
  return 0.5 * x * (1.0 + jax.lax.erf(x * jnp.asarray(0.7071067811865476, x.dtype)))


def activation(name: str):
  if name == "gelu":
    return _gelu_erf
  if name == "gelu_tanh":
    return lambda x: jax.nn.gelu(x, approximate=True)
  if name == "relu":
    return jax.nn.relu
  if name == "tanh":
    return jnp.tanh
  raise ValueError(f"Unknown hidden_act {name!r}")


class HeadProjection(nn.Module):
  """A dense layer with a multi-axis kernel, written as one einsum.

  In to heads: "btH,HND->btND" (kernel [H, N, D]); heads out: "btND,NDH->btH".
  (nn.DenseGeneral initialises a flattened kernel, which defeats logical sharding.)
  The bias has the kernel's last len(bias_axes) dimensions; none when not use_bias.
  """
  config: BertConfig
  kernel_shape: tuple[int, ...]
  kernel_axes: tuple[Optional[str], ...]
  bias_axes: tuple[Optional[str], ...]
  equation: str
  use_bias: bool = True

  @nn.compact
  def __call__(self, x):
    cfg = self.config
    kernel = self.param("kernel", dense_init(cfg, self.kernel_axes), self.kernel_shape,
                        jnp.float32)
    y = jnp.einsum(self.equation, x.astype(cfg.compute_dtype), kernel.astype(cfg.compute_dtype))
    if not self.use_bias:
      return y
    bias_shape = self.kernel_shape[-len(self.bias_axes):]
    bias = self.param("bias", zeros_init(self.bias_axes), bias_shape, jnp.float32)
    return y + bias.astype(cfg.compute_dtype)


def remat_layer(layer_cls, policy: str):
  """The layer class rematerialised by `policy` ("none", "full", "dots"); the layer's
  __call__ must take (hidden, mask, deterministic), `deterministic` a Python bool."""
  if policy == "none":
    return layer_cls
  checkpoint_policy = {"full": None, "dots": jax.checkpoint_policies.checkpoint_dots}[policy]
  return nn.remat(layer_cls, policy=checkpoint_policy, static_argnums=(3,))  # 3: deterministic


def window_bias(length: int, window: int, keys: int | None = None):
  """[1, 1, F, T] additive bias: 0 where |i - j| <= window, else large negative."""
  keys = length if keys is None else keys
  distance = jnp.abs(jnp.arange(length)[:, None] - jnp.arange(keys)[None, :])
  return jnp.where(distance <= window, 0.0, _MASK_BIAS)[None, None]


def _einsum_attention(query, key, value, mask, dropout_rate, dropout_rng, window):
  """Two einsums and a float32 softmax; the only path with probability dropout and probs."""
  query = query / jnp.sqrt(query.shape[-1]).astype(query.dtype)
  logits = jnp.einsum("bfnd,btnd->bnft", query, key,
                      preferred_element_type=jnp.float32)  # [B, N, F, T]
  bias = None if mask is None else mask.bias()
  if window:
    local = window_bias(query.shape[1], window, key.shape[1])
    bias = local if bias is None else bias + local
  probs = jax.nn.softmax(logits if bias is None else logits + bias, axis=-1)
  weights = dropout_lib.dropout(probs, dropout_rate, dropout_rng)
  context = jnp.einsum("bnft,btnd->bfnd", weights.astype(value.dtype), value)
  return context, probs


def _fused_only(impl: str, dropout_rate: float, dropout_rng) -> None:
  if dropout_rate and dropout_rng is not None:
    raise ValueError(f"attention_impl={impl!r} has no attention-probability dropout: set "
                     "model.attention_probs_dropout_prob=0 or attention_impl='einsum'")


def compile_platform() -> str:
  """The platform the program being traced is compiled for: that of the devices of the
  mesh in context (`jax.set_mesh`; a TPU or GPU target's devices on a CPU-only host), else
  JAX's default backend. Every platform decision of a layer reads this, never
  `jax.devices()`."""
  mesh = jax.sharding.get_abstract_mesh()
  if not mesh.empty and mesh.abstract_device is not None:
    return mesh.abstract_device.platform
  return jax.default_backend()


def _local_window(window: int):
  """jax.nn.dot_product_attention's local_window_size for `window` (0: none)."""
  return (window, window) if window else None


def _xla_attention(query, key, value, mask, dropout_rate, dropout_rng, window):
  """jax.nn.dot_product_attention, XLA's implementation (any backend)."""
  _fused_only("xla", dropout_rate, dropout_rng)
  bias = None if mask is None else mask.bias()
  return jax.nn.dot_product_attention(query, key, value, bias=bias, implementation="xla",
                                      local_window_size=_local_window(window)), None


def _cudnn_attention(query, key, value, mask, dropout_rate, dropout_rng, window):
  """jax.nn.dot_product_attention's cuDNN flash kernel (NVIDIA GPU, float16/bfloat16). cuDNN
  has no two-sided sliding window (only a causal one), so a window goes in as bias."""
  _fused_only("cudnn", dropout_rate, dropout_rng)
  platform = compile_platform()
  if platform not in ("gpu", "cuda"):
    raise ValueError(f"attention_impl='cudnn' needs an NVIDIA GPU; the program is compiled "
                     f"for {platform}: use 'einsum' or 'xla'")
  if query.dtype not in (jnp.float16, jnp.bfloat16):
    raise ValueError(f"attention_impl='cudnn' runs in float16 or bfloat16; the model computes "
                     f"in {query.dtype} (model.dtype): set model.dtype=bfloat16 or "
                     "attention_impl='xla'")
  (b, f), t = query.shape[:2], key.shape[1]
  bias = None if mask is None else mask.bias()
  if window:
    local = window_bias(f, window, t)
    bias = local if bias is None else bias + local
  if bias is not None:  # cuDNN takes a [B, 1, F, T] bias, not one broadcast over B or F
    bias = jnp.broadcast_to(bias, (b, 1, f, t)).astype(query.dtype)
  return jax.nn.dot_product_attention(query, key, value, bias=bias,
                                      implementation="cudnn"), None


def divisible_axes(axes, size: int, mesh_shape) -> tuple[str, ...]:
  """The longest prefix of mesh `axes` (a name, names or None) whose product divides
  `size`: how far a dimension can be split along the axes the rules ask for."""
  axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
  while axes and size % int(np.prod([mesh_shape[a] for a in axes])):
    axes = axes[:-1]
  return axes


def _mesh_spec(names, shape, mesh) -> jax.sharding.PartitionSpec:
  """Logical axis names -> the PartitionSpec the rules in context (nn.logical_axis_rules)
  give on `mesh`, each dimension split only as far as its size allows."""
  spec = nn.logical_to_mesh_axes(names)
  out = []
  for size, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
    axes = divisible_axes(axes, size, mesh.shape)
    out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
  return jax.sharding.PartitionSpec(*out)


def _splash_attention(query, key, value, mask, dropout_rate, dropout_rng, window):
  """Pallas splash attention: TPU's Mosaic kernel where the program is compiled for TPU,
  its interpreter (slow; for tests) elsewhere.

  The mask goes in as segment ids (`AttentionMask.segments`). On a mesh (`jax.set_mesh`)
  the kernel runs under `jax.shard_map` (Mosaic kernels cannot be partitioned
  automatically): rows split over the mesh axes of activation_batch and heads over those
  of activation_heads (the logical rules in context), each shard whole along the length.
  """
  _fused_only("splash", dropout_rate, dropout_rng)
  b, f, n, d = query.shape
  t = key.shape[1]
  if f % 128 or t % 128:
    raise ValueError(f"attention_impl='splash' needs sequence lengths that are multiples of "
                     f"128; got {f} x {t} (set data.pad_to_multiple_of=128)")
  if mask is None:
    mask = AttentionMask(jnp.ones((b, t), jnp.int32))
  query_segments, key_segments = mask.segments()
  interpret = compile_platform() != "tpu"
  scaled = query / jnp.sqrt(d).astype(query.dtype)
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or mesh.size == 1:
    return _splash_shard(scaled, key, value, query_segments, key_segments, interpret,
                         window), None
  rows = _mesh_spec(ACT_BTND, query.shape, mesh)  # [B, T, N, D]
  rows = jax.sharding.PartitionSpec(rows[0], None, rows[2], None)
  ids = jax.sharding.PartitionSpec(rows[0], None)  # [B, T]
  sharded = jax.shard_map(lambda *args: _splash_shard(*args, interpret, window), mesh=mesh,
                          in_specs=(rows, rows, rows, ids, ids), out_specs=rows,
                          check_vma=False)
  return sharded(scaled, key, value, query_segments, key_segments), None


def _splash_shard(query, key, value, query_segments, key_segments, interpret: bool,
                  window: int = 0):
  """The splash kernel over one shard: query (scaled) [B, F, N, D], key/value [B, T, N, D],
  segment ids int32 [B, F] / [B, T] -> context [B, F, N, D]; window > 0: splash's local
  mask (keys within `window` positions either side)."""
  from jax.experimental.pallas.ops.tpu.splash_attention import (
      splash_attention_kernel as splash, splash_attention_mask as splash_mask)
  f, n, t = query.shape[1], query.shape[2], key.shape[1]
  block = next(size for size in (512, 256, 128) if f % size == 0 and t % size == 0)
  sizes = splash.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block,
                            block_q_dkv=block, block_kv_dkv=block, block_kv_dkv_compute=block,
                            block_q_dq=block, block_kv_dq=block)
  kernel = splash.make_splash_mha(
      splash_mask.MultiHeadMask([splash_mask.LocalMask((f, t), (window, window), offset=0)
                                 if window else splash_mask.FullMask((f, t))] * n),
      block_sizes=sizes,
      head_shards=1, q_seq_shards=1, interpret=interpret)
  heads_first = lambda x: jnp.swapaxes(x, 1, 2)  # noqa: E731  [B, T, N, D] -> [B, N, T, D]
  context = jax.vmap(lambda q, k, v, qs, ks: kernel(q, k, v, segment_ids=splash.SegmentIds(
      q=qs, kv=ks)))(heads_first(query), heads_first(key), heads_first(value), query_segments,
                     key_segments)
  return heads_first(context)


# config.attention_impl -> fn(query, key, value, mask, dropout_rate, dropout_rng, window)
#   -> (context [B, F, N, D], probs [B, N, F, T] or None where the path has none).
ATTENTION_IMPLS = {"einsum": _einsum_attention, "xla": _xla_attention,
                   "cudnn": _cudnn_attention, "splash": _splash_attention}


def dot_product_attention(query, key, value, mask=None, *, impl: str = "einsum",
                          dropout_rate: float = 0.0, dropout_rng=None, window: int = 0):
  """Multi-head attention of projected queries/keys/values; the core every encoder uses.

  query [B, F, N, D], key/value [B, T, N, D] (compute dtype); mask: an `AttentionMask`
  (which keys each query attends), or None for all. Logits are scaled by 1/sqrt(D) and the
  softmax runs in float32. dropout_rng (None: no dropout) drops attention weights at
  dropout_rate. window > 0: a query also attends only the keys within `window` positions
  either side (|i - j| <= window; ModernBERT's local layers), in every impl (the fused
  ones through their own sliding-window masks). Returns (context [B, F, N, D], probs [B, N, F, T] before dropout, or None).

  impl (a key of ATTENTION_IMPLS; all equal to 1e-5 in float32 where they run):
    "einsum": two einsums; the only one with probability dropout and `probs`.
    "xla":    jax.nn.dot_product_attention(implementation="xla"); any backend.
    "cudnn":  its cuDNN flash-attention kernel; programs compiled for NVIDIA GPUs,
              float16/bfloat16 only.
    "splash": Pallas splash attention; TPU (elsewhere its slow interpreter), under
              shard_map on a mesh; sequence lengths a multiple of 128.
  Platform decisions follow `compile_platform()`. The fused paths ("xla", "cudnn",
  "splash") refuse dropout_rate > 0 with an rng.
  """
  if impl not in ATTENTION_IMPLS:
    raise ValueError(f"attention impl {impl!r}: expected one of {sorted(ATTENTION_IMPLS)}")
  return ATTENTION_IMPLS[impl](query, key, value, mask, dropout_rate, dropout_rng, window)


class SelfAttention(nn.Module):
  """Multi-head self-attention with the output projection (no residual, no norm).

  `config.attention_impl` picks the core (`dot_product_attention`). The einsum core sows
  the attention probabilities (kept when applied with mutable=["intermediates"]; see
  `attention_probs`); the fused ones have none to give and say so.
  """
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, mask, deterministic: bool):
    cfg = self.config
    h, n, d = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim

    def project(name):
      return HeadProjection(cfg, (h, n, d), ("embed", "heads", "kv"), ("heads", "kv"),
                            "bth,hnd->btnd", name=name)(hidden)  # [B, T, N, D]

    query, key, value = project("query"), project("key"), project("value")
    rate = cfg.attention_probs_dropout_prob
    dropout_rng = (None if deterministic or rate == 0.0
                   else dropout_lib.DropoutRng(name="Dropout_0")())
    context, probs = dot_product_attention(query, key, value, mask,
                                           impl=cfg.attention_impl, dropout_rate=rate,
                                           dropout_rng=dropout_rng)  # [B, F, N, D]
    if probs is not None:
      self.sow("intermediates", "attention_probs", probs)
    elif self.is_mutable_collection("intermediates"):
      raise ValueError(f"attention_impl={cfg.attention_impl!r} does not give attention "
                       "probabilities (attention_probs, attention guidance): use 'einsum'")
    context = nn.with_logical_constraint(context, ACT_BTND)
    return HeadProjection(cfg, (n, d, h), ("heads", "kv", "embed"), ("embed",),
                          "bfnd,ndh->bfh", name="out")(context)  # [B, F, H]


def attention_probs(intermediates, num_layers: int) -> list[jax.Array]:
  """L x [B, N, F, T] attention weights from `apply(..., mutable=["intermediates"])`.

  `intermediates` is the returned collection of any model holding a BertModel (at any
  depth), with unrolled or scanned layers.
  """
  def find(tree):
    if "encoder" in tree:
      return tree["encoder"]
    for child in tree.values():
      if isinstance(child, dict) and (found := find(child)) is not None:
        return found
    return None
  encoder = find(intermediates)
  if encoder is None:
    raise ValueError("no encoder in the intermediates: apply with mutable=['intermediates']")
  if "attention" in encoder.get("shared_layer", {}):  # one module, sown at each of L calls
    sown = encoder["shared_layer"]["attention"]["attention_probs"]
    if len(sown) == 1 and sown[0].ndim == 5:  # scanned: one [L, B, N, F, T] array
      return list(sown[0])
    return list(sown)
  probs = [encoder[f"layer_{i}"]["attention"]["attention_probs"][0]
           for i in range(num_layers) if f"layer_{i}" in encoder]  # unrolled, in order
  if "layers" in encoder:  # scanned, after them: one [L - unrolled, B, N, F, T] array
    stacked = encoder["layers"]["layer"]["attention"]["attention_probs"][0]
    probs += [stacked[i] for i in range(num_layers - len(probs))]
  return probs


@flax.struct.dataclass
class AttentionMask:
  """Which keys each query attends, kept as ids: the fused kernels take them as segment
  ids, the others as an additive bias.

  key_mask: int [B, T], 1 for a real key and 0 for padding.
  segment_ids: int [B, T] for packed rows (bert_jax/core/packed_rows.py; several examples a row, a
    query attends the real keys of its own example only), or None: every query attends
    every real key of its row.
  """
  key_mask: jax.Array
  segment_ids: Optional[jax.Array] = None

  def bias(self, dtype=jnp.float32) -> jax.Array:
    """Additive bias, [B, 1, 1, T] ([B, 1, F, T] for packed rows): 0 keep, large negative drop."""
    if self.segment_ids is None:
      return attention_mask_bias(self.key_mask, dtype)
    return segment_mask_bias(self.key_mask, self.segment_ids, dtype)

  def segments(self) -> tuple[jax.Array, jax.Array]:
    """(query [B, F], key [B, T]) int32 segment ids saying the same: a query attends the keys
    of its own id; padding keys get -1, an id no query has."""
    queries = (jnp.zeros_like(self.key_mask) if self.segment_ids is None
               else self.segment_ids).astype(jnp.int32)
    return queries, jnp.where(self.key_mask > 0, queries, -1)


def attention_mask_bias(attention_mask, dtype=jnp.float32):
  """[B, T] 1/0 mask -> [B, 1, 1, T] additive bias (0 keep, large negative drop)."""
  keep = attention_mask[:, None, None, :].astype(dtype)
  return (1.0 - keep) * _MASK_BIAS


def segment_mask_bias(attention_mask, segment_ids, dtype=jnp.float32):
  """Packed rows: [B, T] 1/0 mask and int segment ids -> [B, 1, F, T] additive bias.

  A query attends to the real keys of its own segment (example) only.
  """
  same = segment_ids[:, :, None] == segment_ids[:, None, :]  # [B, F, T]
  keep = (same & (attention_mask[:, None, :] > 0))[:, None].astype(dtype)
  return (1.0 - keep) * _MASK_BIAS
