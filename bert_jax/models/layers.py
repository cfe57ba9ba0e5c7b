"""Layers every encoder of the family shares: initialisers, LayerNorm, activations, the
attention block, and the logical axis names of activations.

Shape legend (as in google-research/bert):
  B: batch size            T: sequence length (F "from" / T "to" in attention)
  H: hidden size           N: number of attention heads     D: head size (H / N)
  I: intermediate size     V: vocabulary size               L: number of layers

Every kernel carries logical axis names, mapped to mesh axes by the rules table in
`bert_jax.sharding`: embed, heads, kv, mlp, vocab, and `layers` for the stacked axis when
`scan_layers` is on; activations use `activation_*` names (batch, length, embed, ...).
Params are float32; activations run in `config.compute_dtype`; softmax and LayerNorm
statistics are computed in float32.
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

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


def layer_norm(config: BertConfig, name: str) -> nn.LayerNorm:
  """LayerNorm in float32 (its output is cast back by the caller)."""
  return nn.LayerNorm(
      epsilon=config.layer_norm_eps, dtype=jnp.float32, param_dtype=jnp.float32,
      scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
      bias_init=zeros_init(("embed",)), name=name)


def activation(name: str):
  if name == "gelu":
    return lambda x: jax.nn.gelu(x, approximate=False)
  if name == "gelu_tanh":
    return lambda x: jax.nn.gelu(x, approximate=True)
  if name == "relu":
    return jax.nn.relu
  raise ValueError(f"Unknown hidden_act {name!r}")


class HeadProjection(nn.Module):
  """A dense layer with a multi-axis kernel, written as one einsum.

  In to heads: "btH,HND->btND" (kernel [H, N, D]); heads out: "btND,NDH->btH".
  (nn.DenseGeneral initialises a flattened kernel, which defeats logical sharding.)
  """
  config: BertConfig
  kernel_shape: tuple[int, ...]
  kernel_axes: tuple[str, ...]
  bias_axes: tuple[str, ...]
  equation: str

  @nn.compact
  def __call__(self, x):
    cfg = self.config
    kernel = self.param("kernel", dense_init(cfg, self.kernel_axes), self.kernel_shape,
                        jnp.float32)
    bias_shape = self.kernel_shape[-len(self.bias_axes):]
    bias = self.param("bias", zeros_init(self.bias_axes), bias_shape, jnp.float32)
    y = jnp.einsum(self.equation, x.astype(cfg.compute_dtype), kernel.astype(cfg.compute_dtype))
    return y + bias.astype(cfg.compute_dtype)


class SelfAttention(nn.Module):
  """Multi-head self-attention with the output projection (no residual, no norm)."""
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, mask_bias, deterministic: bool):
    cfg = self.config
    h, n, d = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim

    def project(name):
      return HeadProjection(cfg, (h, n, d), ("embed", "heads", "kv"), ("heads", "kv"),
                            "bth,hnd->btnd", name=name)(hidden)  # [B, T, N, D]

    query, key, value = project("query"), project("key"), project("value")
    query = query / jnp.sqrt(d).astype(cfg.compute_dtype)
    logits = jnp.einsum("bfnd,btnd->bnft", query, key,
                        preferred_element_type=jnp.float32)  # [B, N, F, T]
    probs = jax.nn.softmax(logits + mask_bias, axis=-1)
    # Kept only when applied with mutable=["intermediates"]; see `attention_probs`.
    self.sow("intermediates", "attention_probs", probs)
    probs = nn.Dropout(cfg.attention_probs_dropout_prob)(probs, deterministic=deterministic)
    context = jnp.einsum("bnft,btnd->bfnd", probs.astype(cfg.compute_dtype), value)
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
  if "layers" in encoder:  # scanned: one [L, B, N, F, T] array
    stacked = encoder["layers"]["layer"]["attention"]["attention_probs"][0]
    return [stacked[i] for i in range(num_layers)]
  if "attention" in encoder.get("shared_layer", {}):  # one module, sown at each of L calls
    return list(encoder["shared_layer"]["attention"]["attention_probs"])
  return [encoder[f"layer_{i}"]["attention"]["attention_probs"][0] for i in range(num_layers)]


def attention_mask_bias(attention_mask, dtype=jnp.float32):
  """[B, T] 1/0 mask -> [B, 1, 1, T] additive bias (0 keep, large negative drop)."""
  keep = attention_mask[:, None, None, :].astype(dtype)
  return (1.0 - keep) * _MASK_BIAS
