"""ModernBERT (Warner et al. 2024): its embeddings and layer stack, for `BertModel`.

What differs from BERT's encoder (bert.py), all equal to HF's `ModernBertModel`:
  - embeddings: word embeddings + LayerNorm only (no position table, no segments);
  - positions: rotary embeddings (RoPE) on queries and keys, base `global_rope_theta` in
    global layers and `local_rope_theta` in local ones; packed rows (several examples a
    row, bert_jax/core/packed_rows.py) rotate by each example's own positions, and a local window
    never crosses into another example (the segment mask keeps attention within it);
  - pre-norm layers: x = x + Attn(LN(x)); x = x + MLP(LN(x)); layer 0 has no attention
    LayerNorm (the embeddings are normalised already); one final LayerNorm;
  - attention: a fused q/k/v projection; layer i is global when
    i % global_attn_every_n_layers == 0, else local: token i sees token j only when
    |i - j| <= local_attention // 2 (HF's bidirectional sliding window);
  - feed-forward: GeGLU, Wi: H -> 2 x I, act(input) * gate, Wo: I -> H;
  - biases of norms / attention / MLP as `norm_bias` / `attention_bias` / `mlp_bias` (all
    false in the released models).
The MLM head is heads.MaskedLMHead (dense + act + norm, decoder tied to the embeddings).

Shape legend (layers.py): B batch, T length, H hidden, N heads, D head size, I intermediate.
Param names: embeddings/{word_embeddings, layer_norm}; encoder/layer_i/{attention_layer_norm
(not in layer 0), attention/{qkv [H, 3, N, D], out [N, D, H]}, mlp_layer_norm,
mlp/{wi [H, 2, I], wo [I, H]}}; encoder/final_layer_norm.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models import layers
from bert_jax.models.dropout import Dropout, DropoutRng, dropout
from bert_jax.models.layers import (ACT_BTH, ACT_BTI, ACT_BTND, HeadProjection, activation,
                                    check_length, dense_init, dot_product_attention,
                                    layer_norm, remat_layer, zeros_init)


class Embeddings(nn.Module):
  """LayerNorm(word embeddings), then dropout; token types are ignored."""
  config: BertConfig

  def setup(self):
    cfg = self.config
    self.word_embeddings = nn.Embed(
        cfg.vocab_size, cfg.hidden_size, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
        embedding_init=dense_init(cfg, ("vocab", "embed")), name="word_embeddings")
    self.layer_norm = layer_norm(cfg, "layer_norm")
    self.dropout = Dropout(cfg.hidden_dropout_prob)

  def __call__(self, input_ids, token_type_ids, deterministic: bool, positions=None,
               task_type_ids=None):
    # positions act in attention (RoPE), not here; no segment or task-type tables
    del token_type_ids, positions, task_type_ids
    check_length(self.config, input_ids.shape[1])  # the context length RoPE trained for
    x = self.layer_norm(self.word_embeddings(input_ids)).astype(self.config.compute_dtype)
    x = nn.with_logical_constraint(x, ACT_BTH)  # [B, T, H]
    return self.dropout(x, deterministic=deterministic)


def rotary(x, theta: float, positions=None):
  """RoPE on [B, T, N, D] in float32: x * cos + rotate_half(x) * sin, frequencies
  theta^(-2k/D) for k < D/2, each used by dimensions k and k + D/2. positions: int [B, T]
  (a packed row's per-example offsets), or None for 0..T-1 along every row."""
  length, dim = x.shape[1], x.shape[-1]
  inv_freq = 1.0 / (theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))  # [D/2]
  if positions is None:
    positions = jnp.arange(length)[None, :]  # [1, T]
  angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [B or 1, T, D/2]
  angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]  # [B or 1, T, 1, D]
  x32 = x.astype(jnp.float32)
  first, second = jnp.split(x32, 2, axis=-1)
  rotated = jnp.concatenate([-second, first], axis=-1)
  return (x32 * jnp.cos(angles) + rotated * jnp.sin(angles)).astype(x.dtype)


def window_bias(length: int, local_attention: int):
  """[1, 1, T, T] additive bias: 0 where |i - j| <= local_attention // 2, else large negative."""
  return layers.window_bias(length, local_attention // 2)


class Attention(nn.Module):
  """Fused-QKV self-attention with RoPE, global or sliding-window, and its output projection.

  is_global: a Python bool (unrolled layers) or a traced bool scalar (scanned layers, one
  per layer); it picks the RoPE base and whether the window bias applies.
  """
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, mask, deterministic: bool, positions=None, is_global=True):
    cfg = self.config
    h, n, d = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    qkv = HeadProjection(cfg, (h, 3, n, d), ("embed", None, "heads", "kv"),
                         (None, "heads", "kv"), "bth,hcnd->btcnd", use_bias=cfg.attention_bias,
                         name="qkv")(hidden)  # [B, T, 3, N, D]
    query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    theta = jnp.where(is_global, cfg.global_rope_theta, cfg.local_rope_theta)
    query, key = rotary(query, theta, positions), rotary(key, theta, positions)
    rate = cfg.attention_probs_dropout_prob
    # One rng stream for the probabilities' dropout and the output's, in that order.
    rngs = None if deterministic or rate == 0.0 else DropoutRng(name="Dropout_0")

    def attend(window):  # the core of config.attention_impl (layers.dot_product_attention)
      return dot_product_attention(query, key, value, mask, impl=cfg.attention_impl,
                                   dropout_rate=rate, dropout_rng=probs_rng, window=window)
    probs_rng = None if rngs is None else rngs()
    window = cfg.local_attention // 2
    if isinstance(is_global, (bool, np.bool_)):
      context, probs = attend(0 if is_global else window)
    else:  # a scanned layer's traced flag
      context, probs = jax.lax.cond(is_global, lambda: attend(0), lambda: attend(window))
    if probs is not None:
      self.sow("intermediates", "attention_probs", probs)  # see layers.attention_probs
    elif self.is_mutable_collection("intermediates"):
      raise ValueError(f"attention_impl={cfg.attention_impl!r} does not give attention "
                       "probabilities (attention_probs): use 'einsum'")
    context = nn.with_logical_constraint(context, ACT_BTND)
    out = HeadProjection(cfg, (n, d, h), ("heads", "kv", "embed"), ("embed",),
                         "bfnd,ndh->bfh", use_bias=cfg.attention_bias, name="out")(context)
    return dropout(out, rate, None if rngs is None else rngs())  # [B, F, H]


class GeGLU(nn.Module):
  """Wo(dropout(act(x Wi_input) * (x Wi_gate))): [B, T, H] -> [B, T, H]."""
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, deterministic: bool):
    cfg = self.config
    h, i = cfg.hidden_size, cfg.intermediate_size
    both = HeadProjection(cfg, (h, 2, i), ("embed", None, "mlp"), (None, "mlp"),
                          "bth,hgi->btgi", use_bias=cfg.mlp_bias, name="wi")(hidden)  # [B, T, 2, I]
    gated = activation(cfg.hidden_act)(both[:, :, 0]) * both[:, :, 1]
    gated = nn.with_logical_constraint(gated, ACT_BTI)
    gated = Dropout(cfg.hidden_dropout_prob)(gated, deterministic=deterministic)
    return nn.Dense(h, use_bias=cfg.mlp_bias, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
                    kernel_init=dense_init(cfg, ("mlp", "embed")),
                    bias_init=zeros_init(("embed",)), name="wo")(gated)


class Layer(nn.Module):
  """One pre-norm layer; the first has no attention LayerNorm. is_global: see Attention."""
  config: BertConfig
  attention_norm: bool

  @nn.compact
  def __call__(self, hidden, mask, deterministic: bool, positions=None, is_global=True):
    cfg = self.config
    attention_in = hidden
    if self.attention_norm:
      attention_in = layer_norm(cfg, "attention_layer_norm")(hidden).astype(cfg.compute_dtype)
    hidden = hidden + Attention(cfg, name="attention")(
        attention_in, mask, deterministic, positions, is_global)
    mlp_in = layer_norm(cfg, "mlp_layer_norm")(hidden).astype(cfg.compute_dtype)
    hidden = hidden + GeGLU(cfg, name="mlp")(mlp_in, deterministic)
    return nn.with_logical_constraint(hidden, ACT_BTH)


def is_global_layer(config: BertConfig, index: int) -> bool:
  return index % config.global_attn_every_n_layers == 0


class _ScannedLayer(nn.Module):
  """Adapts Layer to nn.scan's (carry, x) -> (carry, y): x is the layer's is_global."""
  config: BertConfig
  deterministic: bool

  @nn.compact
  def __call__(self, hidden, is_global, mask, positions):
    layer_cls = remat_layer(Layer, self.config.remat_policy)
    hidden = layer_cls(self.config, attention_norm=True, name="layer")(
        hidden, mask, self.deterministic, positions, is_global)
    return hidden, hidden


class Encoder(nn.Module):
  """L layers (`layer_0` ...), then the final LayerNorm. Same call as bert.Encoder.

  With scan_layers, layer 0 is `layer_0` and layers 1 .. L-1 are `layers/layer`, stacked on
  a leading [L - 1] axis and run by `nn.scan`, each told whether it is global.
  hidden_states (when asked): the embeddings, then each layer's output, the last one
  after the final LayerNorm (as HF's).
  """
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, mask, deterministic: bool, output_hidden_states: bool,
               positions=None):
    cfg = self.config
    layer_cls = remat_layer(Layer, cfg.remat_policy)
    # Under scan, layer 0 (no attention LayerNorm: its params differ) stays unrolled.
    unrolled = (family_of(cfg).unrolled_layers if cfg.scan_layers else cfg.num_hidden_layers)
    all_states = [hidden]
    for i in range(min(unrolled, cfg.num_hidden_layers)):
      hidden = layer_cls(cfg, attention_norm=i > 0, name=f"layer_{i}")(
          hidden, mask, deterministic, positions, is_global_layer(cfg, i))
      all_states.append(hidden)
    stacked = cfg.num_hidden_layers - unrolled
    if stacked > 0:
      scanned = nn.scan(
          _ScannedLayer, variable_axes={"params": 0, "intermediates": 0},
          split_rngs={"params": True, "dropout": True},
          in_axes=(0, nn.broadcast, nn.broadcast), length=stacked,
          metadata_params={nn.PARTITION_NAME: "layers"})
      is_global = jnp.array([is_global_layer(cfg, i)
                             for i in range(unrolled, cfg.num_hidden_layers)])
      hidden, per_layer = scanned(cfg, deterministic, name="layers")(
          hidden, is_global, mask, positions)
      all_states += [per_layer[i] for i in range(stacked)]
    hidden = layer_norm(cfg, "final_layer_norm")(hidden).astype(cfg.compute_dtype)
    all_states[-1] = hidden
    return hidden, (tuple(all_states) if output_hidden_states else None)
