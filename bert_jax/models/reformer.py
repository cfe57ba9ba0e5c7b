"""Reformer (Kitaev et al. 2020): its embeddings and reversible layer stack, for `BertModel`.

The encoder (non-causal) use of HF's `ReformerModel`, equal to it in float32:
  - embeddings: word embeddings (dropout) + axial position embeddings (`axial_pos_shape`:
    position p is the mixed-radix digits of p in those factors; each factor has its own
    table, `axial_pos_embds_dim` wide, concatenated to H) or a learned table; no
    segments, no LayerNorm;
  - layers (`attn_layers`): "local" attention within a chunk and its neighbours, or "lsh"
    attention: shared query/key vectors hashed by random rotations into buckets
    (`num_hashes` rounds), sorted by bucket, chunked, each chunk attending to itself and
    its neighbours; a token never attends to itself unless nothing else is visible;
    several rounds combined by their log-sum-exp weights;
  - reversible residuals (RevNet): two streams, y1 = x1 + Attn(x2), y2 = x2 + FF(y1);
    the backward pass rebuilds x2 = y2 - FF(y1), x1 = y1 - Attn(x2) layer by layer
    (`jax.custom_vjp`), so only the last layer's output and each LSH layer's buckets are
    kept for it; `reversible=False` runs the same layers under plain autodiff;
  - the feed-forward (LayerNorm, dense, dropout, act, dense) runs over
    `chunk_size_feed_forward` tokens at a time (`nn.scan`);
  - sequence_output is LayerNorm(concat(y1, y2)): 2H wide; hidden_states are the x2
    stream (H wide) before each layer and after the last, as HF's.

LSH rotations: HF draws them with torch's generator; they come here from the
"lsh_rotations" collection when given ({"layer_i": [N, D, hashes, buckets / 2]}, as
`rotation_shape`), else from jax.random (see `BertConfig.hash_seed`), so equal seeds give
different rotations on the two sides. Rows longer than the smallest chunk run padded to a
multiple of the chunk lengths' least common multiple, as HF pads them at inference (HF
refuses such rows in training; here they train too).

Shape legend: B batch, T length, H hidden, N heads, D head size, C chunks, L chunk
length, K keys a chunk sees ((1 + before + after) L), R hash rounds.
"""
import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models import layers
from bert_jax.models.config import BertConfig
from bert_jax.models.reformer_attention import (bucket_factors, hash_vectors,
                                                local_attention, lsh_attention)
from bert_jax.models.dropout import Dropout
from bert_jax.models.layers import (ACT_BTH, AttentionMask, HeadProjection, activation,
                                    dense_init, layer_norm)

ATTENTION_KINDS = ("local", "lsh")


def validate(cfg: BertConfig) -> None:
  """One line for a Reformer config that cannot run."""
  if not cfg.attn_layers or set(cfg.attn_layers) - set(ATTENTION_KINDS):
    raise ValueError(f"BertConfig: attn_layers={cfg.attn_layers} must be a non-empty list of "
                     f"{ATTENTION_KINDS}")
  if len(cfg.attn_layers) != cfg.num_hidden_layers:
    raise ValueError(f"BertConfig: attn_layers has {len(cfg.attn_layers)} entries, "
                     f"num_hidden_layers={cfg.num_hidden_layers}")
  if cfg.axial_pos_shape and sum(cfg.axial_pos_embds_dim) != cfg.hidden_size:
    raise ValueError(f"BertConfig: axial_pos_embds_dim={cfg.axial_pos_embds_dim} must sum to "
                     f"hidden_size={cfg.hidden_size}")
  if cfg.axial_pos_shape and len(cfg.axial_pos_shape) != len(cfg.axial_pos_embds_dim):
    raise ValueError(f"BertConfig: axial_pos_shape={cfg.axial_pos_shape} and "
                     f"axial_pos_embds_dim={cfg.axial_pos_embds_dim} differ in length")
  if cfg.scan_layers or cfg.remat_policy != "none":
    raise ValueError(f"BertConfig: scan_layers={cfg.scan_layers}, remat_policy="
                     f"{cfg.remat_policy!r}: Reformer's layers run unrolled and reversible "
                     "(they recompute themselves); set scan_layers=False, remat_policy='none'")
  if cfg.lsh_attention_groups < 1:
    raise ValueError(f"BertConfig: lsh_attention_groups={cfg.lsh_attention_groups} must be "
                     "at least 1")
  factors = (cfg.num_buckets if isinstance(cfg.num_buckets, tuple)
             else (cfg.num_buckets,) if cfg.num_buckets is not None else ())
  if any(f % 2 for f in factors):
    raise ValueError(f"BertConfig: num_buckets={cfg.num_buckets} must be even (each factor)")


def chunk_lengths(cfg: BertConfig) -> list[int]:
  return [cfg.lsh_attn_chunk_length if kind == "lsh" else cfg.local_attn_chunk_length
          for kind in sorted(set(cfg.attn_layers))]


def padded_length(cfg: BertConfig, length: int) -> int:
  """The length the layers run at: rows longer than the smallest chunk are padded to a
  multiple of the chunk lengths' least common multiple (as HF pads them)."""
  lengths = chunk_lengths(cfg)
  multiple = math.lcm(*lengths)
  if length <= min(lengths) or length % multiple == 0:
    return length
  return length + multiple - length % multiple


def check_reformer_length(cfg: BertConfig, length: int) -> None:
  """One line when rows are longer than the model's positions."""
  if cfg.axial_pos_shape and length > math.prod(cfg.axial_pos_shape):
    raise ValueError(f"Reformer: sequence length {length} exceeds the axial positions "
                     f"{cfg.axial_pos_shape} (product {math.prod(cfg.axial_pos_shape)})")
  if not cfg.axial_pos_shape and length > cfg.max_position_embeddings:
    raise ValueError(f"Sequence length {length} exceeds max_position_embeddings="
                     f"{cfg.max_position_embeddings}")


def rotation_shape(cfg: BertConfig, length: int) -> tuple[int, int, int, int]:
  """[N, D, R, sum of factors / 2]: one LSH layer's random rotations for rows of `length`."""
  return (cfg.num_attention_heads, cfg.head_dim, cfg.num_hashes,
          sum(bucket_factors(cfg, length)) // 2)


# ------------------------------------------------------------------------- embeddings

def axial_coordinates(positions, shape: tuple[int, ...]) -> list[jax.Array]:
  """int positions -> their row-major digits in the factors `shape` (one array per axis)."""
  coords = []
  for axis in range(len(shape)):
    stride = math.prod(shape[axis + 1:])
    coords.append((positions // stride) % shape[axis])
  return coords


class Embeddings(nn.Module):
  """Word embeddings, dropout, + axial (or learned) position embeddings: [B, T, H].
  Axial tables are `axial_i`, in HF's shape [1.., size_i, ..1, width_i]."""
  config: BertConfig

  def setup(self):
    cfg = self.config
    validate(cfg)
    self.word_embeddings = nn.Embed(
        cfg.vocab_size, cfg.hidden_size, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
        embedding_init=dense_init(cfg, ("vocab", "embed")), name="word_embeddings")
    factors = cfg.axial_pos_shape
    if factors:
      self.axial_tables = [
          self.param(f"axial_{axis}", nn.with_logical_partitioning(
              nn.initializers.normal(cfg.axial_norm_std), (None,) * (len(factors) + 1)),
                     tuple(size if i == axis else 1 for i in range(len(factors))) + (width,),
                     jnp.float32)
          for axis, (size, width) in enumerate(zip(factors, cfg.axial_pos_embds_dim))]
    else:
      self.position_embeddings = nn.Embed(
          cfg.max_position_embeddings, cfg.hidden_size, dtype=cfg.compute_dtype,
          param_dtype=jnp.float32, embedding_init=dense_init(cfg, (None, "embed")),
          name="position_embeddings")
    self.word_dropout = Dropout(cfg.hidden_dropout_prob)
    self.position_dropout = Dropout(cfg.hidden_dropout_prob)

  def __call__(self, input_ids, token_type_ids, deterministic: bool, positions=None,
               task_type_ids=None):
    del token_type_ids, task_type_ids  # no segment or task-type tables
    cfg = self.config
    length = input_ids.shape[1]
    check_reformer_length(cfg, length)
    words = self.word_dropout(self.word_embeddings(input_ids), deterministic=deterministic)
    if positions is None:
      positions = jnp.arange(length)[None, :]  # [1, T]
    if cfg.axial_pos_shape:
      coords = axial_coordinates(positions, cfg.axial_pos_shape)
      position_vectors = jnp.concatenate(
          [table.reshape(table.shape[axis], -1)[c]
           for axis, (table, c) in enumerate(zip(self.axial_tables, coords))], axis=-1)
    else:
      position_vectors = self.position_embeddings(positions)
    position_vectors = self.position_dropout(position_vectors.astype(cfg.compute_dtype),
                                             deterministic=deterministic)
    return nn.with_logical_constraint(words + position_vectors, ACT_BTH)


# -------------------------------------------------------------------------- attention

class AttentionBlock(nn.Module):
  """LayerNorm, local or LSH self-attention, output projection, dropout: [B, T, H].

  Returns (output, buckets): LSH layers' buckets [B, N, R, T] (None for local layers and
  rows within one chunk), hashed here unless given (the backward pass reuses them).
  """
  config: BertConfig
  kind: str

  @nn.compact
  def __call__(self, hidden, mask, rotations, deterministic: bool, buckets=None):
    cfg = self.config
    n, d = cfg.num_attention_heads, cfg.head_dim

    def project(name):  # [B, T, H] -> [B, N, T, D]
      return HeadProjection(cfg, (cfg.hidden_size, n, d), ("embed", "heads", "kv"),
                            ("heads", "kv"), "bth,hnd->btnd", use_bias=False,
                            name=name)(hidden).transpose(0, 2, 1, 3)

    hidden = layer_norm(cfg, "layer_norm")(hidden).astype(cfg.compute_dtype)
    rate = (cfg.lsh_attention_probs_dropout_prob if self.kind == "lsh"
            else cfg.attention_probs_dropout_prob)
    rng = None if deterministic or rate == 0.0 else self.make_rng("dropout")
    if self.kind == "lsh":
      query_key, value = project("query_key"), project("value")
      if buckets is None and hidden.shape[1] > cfg.lsh_attn_chunk_length:
        buckets = hash_vectors(cfg, query_key, rotations, mask)
      context = lsh_attention(cfg, query_key, value, mask, buckets, rng)
    else:
      context = local_attention(cfg, project("query"), project("key"), project("value"),
                                mask, rng)
    out = HeadProjection(cfg, (n, d, cfg.hidden_size), ("heads", "kv", "embed"), ("embed",),
                         "btnd,ndh->bth", use_bias=False,
                         name="out")(context.transpose(0, 2, 1, 3))  # [B, T, H]
    return Dropout(cfg.hidden_dropout_prob)(out, deterministic=deterministic), buckets


class _FeedForwardChunk(nn.Module):
  """LayerNorm, dense (H -> I), dropout, act, dense (I -> H), dropout, on one chunk."""
  config: BertConfig
  deterministic: bool

  @nn.compact
  def __call__(self, carry, hidden):
    cfg = self.config
    drop = Dropout(cfg.hidden_dropout_prob)

    dense = functools.partial(layers.dense, cfg)
    x = layer_norm(cfg, "layer_norm")(hidden).astype(cfg.compute_dtype)
    x = drop(dense(cfg.intermediate_size, ("embed", "mlp"), "dense")(x), self.deterministic)
    x = dense(cfg.hidden_size, ("mlp", "embed"), "output")(activation(cfg.hidden_act)(x))
    return carry, drop(x, self.deterministic)


_ScannedFeedForward = nn.scan(_FeedForwardChunk, variable_broadcast="params",
                              split_rngs={"params": False, "dropout": True})


class FeedForward(nn.Module):
  """The feed-forward over `chunk_size_feed_forward` tokens at a time: [B, T, H]."""
  config: BertConfig
  deterministic: bool

  @nn.compact
  def __call__(self, hidden):
    b, t, h = hidden.shape
    size = min(self.config.chunk_size_feed_forward or t, t)
    if t % size:
      raise ValueError(f"Reformer: sequence length {t} is not a multiple of "
                       f"chunk_size_feed_forward={size}")
    chunks = hidden.reshape(b, t // size, size, h).transpose(1, 0, 2, 3)  # [T / c, B, c, H]
    _, out = _ScannedFeedForward(self.config, self.deterministic, name="chunks")(None, chunks)
    return out.transpose(1, 0, 2, 3).reshape(b, t, h)


class Layer(nn.Module):
  """One reversible layer: (x1, x2) -> (x1 + Attn(x2), x2 + FF(x1 + Attn(x2)))."""
  config: BertConfig
  kind: str
  deterministic: bool

  def setup(self):
    self.attention = AttentionBlock(self.config, self.kind)
    self.feed_forward = FeedForward(self.config, self.deterministic)

  def __call__(self, x1, x2, mask, rotations):
    attended, buckets = self.attention(x2, mask, rotations, self.deterministic)
    y1 = x1 + attended
    return y1, x2 + self.feed_forward(y1), buckets


# ------------------------------------------------------------------- reversible stack
# Each layer's two halves as pure functions of (its params, input, its rng), applied by
# module instances bound to nothing (so they can run inside jax.custom_vjp).

def _attention_fn(cfg, kind, deterministic, params, x2, mask, rotations, rng, buckets=None):
  return AttentionBlock(cfg, kind, parent=None).apply(
      {"params": params}, x2, mask, rotations, deterministic, buckets,
      rngs=None if rng is None else {"dropout": rng})


def _feed_forward_fn(cfg, deterministic, params, y1, rng):
  return FeedForward(cfg, deterministic, parent=None).apply(
      {"params": params}, y1, rngs=None if rng is None else {"dropout": rng})


def _stack_forward(static, params, x1, x2, aux):
  """The layers in order: -> (y1, y2, each layer's buckets, the x2 stream before each
  layer and after the last)."""
  cfg, deterministic = static
  mask, rotations, rngs = aux
  all_buckets, states = [], [x2]
  for i, kind in enumerate(cfg.attn_layers):
    attended, buckets = _attention_fn(cfg, kind, deterministic, params[i]["attention"], x2,
                                      mask, rotations[i], rngs[i][0])
    x1 = x1 + attended
    x2 = x2 + _feed_forward_fn(cfg, deterministic, params[i]["feed_forward"], x1, rngs[i][1])
    all_buckets.append(buckets)
    states.append(x2)
  return x1, x2, all_buckets, states


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def reversible_stack(static, params, x1, x2, aux):
  """(y1, y2) of the layers; the backward pass recomputes each layer's input from its
  output. static: (config, deterministic); params: per layer {"attention",
  "feed_forward"}; aux: (mask bool [B, T], per-layer rotations or None, per-layer
  (attention rng, feed-forward rng) or None), not differentiated."""
  y1, y2, _, _ = _stack_forward(static, params, x1, x2, aux)
  return y1, y2


def _reversible_fwd(static, params, x1, x2, aux):
  y1, y2, all_buckets, _ = _stack_forward(static, params, x1, x2, aux)
  return (y1, y2), (params, y1, y2, aux, all_buckets)


def _zero_cotangent(x):
  if jnp.issubdtype(x.dtype, jnp.inexact):
    return jnp.zeros_like(x)
  return np.zeros(x.shape, jax.dtypes.float0)


def _reversible_bwd(static, residuals, cotangents):
  cfg, deterministic = static
  params, y1, y2, aux, all_buckets = residuals
  mask, rotations, rngs = aux
  dy1, dy2 = cotangents
  grads = [None] * len(params)
  for i in reversed(range(len(params))):
    kind, (attention_rng, ff_rng) = cfg.attn_layers[i], rngs[i]
    # y2 = x2 + FF(y1): rebuild x2, carry FF's gradient into y1.
    ff_out, ff_vjp = jax.vjp(
        lambda p, h: _feed_forward_fn(cfg, deterministic, p, h, ff_rng),
        params[i]["feed_forward"], y1)
    ff_grads, dy1_from_ff = ff_vjp(dy2)
    x2 = y2 - ff_out
    dy1 = dy1 + dy1_from_ff
    # y1 = x1 + Attn(x2): rebuild x1 (with the forward pass's buckets).
    buckets = all_buckets[i]
    attention_out, attention_vjp = jax.vjp(
        lambda p, h: _attention_fn(cfg, kind, deterministic, p, h, mask, rotations[i],
                                   attention_rng, buckets)[0],
        params[i]["attention"], x2)
    attention_grads, dx2_from_attention = attention_vjp(dy1)
    x1 = y1 - attention_out
    dy2 = dy2 + dx2_from_attention
    grads[i] = {"attention": attention_grads, "feed_forward": ff_grads}
    y1, y2 = x1, x2
  return grads, dy1, dy2, jax.tree.map(_zero_cotangent, aux)


reversible_stack.defvjp(_reversible_fwd, _reversible_bwd)


def _key_data(key):
  return jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key


class Encoder(nn.Module):
  """The reversible stack, then LayerNorm over concat(y1, y2) and dropout: [B, T, 2H].
  Same call as bert.Encoder. Params: `layer_i/attention`, `layer_i/feed_forward`,
  `layer_norm`."""
  config: BertConfig

  def _rotations(self, index: int, length: int, deterministic: bool):
    """Layer `index`'s LSH rotations [N, D, R, buckets / 2]: the "lsh_rotations"
    collection's, else random (see BertConfig.hash_seed)."""
    cfg = self.config
    name = f"layer_{index}"
    if self.has_variable("lsh_rotations", name):
      return self.get_variable("lsh_rotations", name)
    if cfg.hash_seed is not None:
      key = jax.random.PRNGKey(cfg.hash_seed)
    elif not deterministic and self.has_rng("dropout"):
      key = self.make_rng("dropout")
    else:
      key = jax.random.fold_in(jax.random.PRNGKey(0), index)
    return jax.random.normal(key, rotation_shape(cfg, length), jnp.float32)

  @nn.compact
  def __call__(self, hidden, attention_mask: AttentionMask, deterministic: bool,
               output_hidden_states: bool, positions=None):
    del positions  # added by the embeddings
    cfg = self.config
    if attention_mask.segment_ids is not None:
      raise ValueError("Reformer: packed rows (a per-query mask) are not supported; set "
                       "data.packing off")
    mask = attention_mask.key_mask > 0  # [B, T]: real keys
    length, original = padded_length(cfg, hidden.shape[1]), hidden.shape[1]
    # Padding (masked keys, their own LSH bucket) never changes a real token's output.
    hidden = jnp.pad(hidden, ((0, 0), (0, length - original), (0, 0)))
    mask = jnp.pad(mask, ((0, 0), (0, length - original)))
    hashed = length > cfg.lsh_attn_chunk_length  # else LSH layers attend to the whole row
    rotations = [self._rotations(i, length, deterministic) if kind == "lsh" and hashed
                 else None for i, kind in enumerate(cfg.attn_layers)]
    rngs = [(None, None) if deterministic else
            (_key_data(self.make_rng("dropout")), _key_data(self.make_rng("dropout")))
            for _ in cfg.attn_layers]
    layers = [Layer(cfg, kind, deterministic, name=f"layer_{i}")
              for i, kind in enumerate(cfg.attn_layers)]
    if self.is_initializing():  # the params, by the modules that own them
      for layer, layer_rotations in zip(layers, rotations):
        layer(hidden, hidden, mask, layer_rotations)
    static, aux = (cfg, deterministic), (mask, rotations, rngs)
    params = [self.variables["params"][f"layer_{i}"] for i in range(len(layers))]
    all_states = None
    if output_hidden_states or not cfg.reversible:  # plain autodiff; every state kept
      x1, x2, _, all_states = _stack_forward(static, params, hidden, hidden, aux)
    else:
      x1, x2 = reversible_stack(static, params, hidden, hidden, aux)
    out = layer_norm(cfg, "layer_norm")(jnp.concatenate([x1, x2], axis=-1))[:, :original]
    out = Dropout(cfg.hidden_dropout_prob)(out.astype(cfg.compute_dtype),
                                           deterministic=deterministic)
    if all_states is not None:
      all_states = tuple(state[:, :original] for state in all_states)
    return out, (all_states if output_hidden_states else None)
