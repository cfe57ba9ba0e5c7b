"""Reformer's attention (Kitaev et al. 2020) as pure functions: chunked local attention and
LSH attention (hash by random rotations, sort by bucket, chunk, attend within the chunk and
its neighbours, combine the hash rounds by their log-sum-exp), equal to HF's
`LocalSelfAttention` / `LSHSelfAttention` in float32. `bert_jax.models.reformer` builds
the layers around them.

Shape legend: B batch, T length, N heads, D head size, C chunks, L chunk length, K keys a
chunk sees ((1 + before + after) L), R hash rounds.
"""
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.models.config import BertConfig
from bert_jax.models.dropout import dropout

MASK_VALUE = -1e9  # padding keys (HF's mask_value_float32)
SELF_MASK_VALUE = -1e5  # a token's own key in LSH attention (HF's self_mask_value_float32)


def bucket_factors(cfg: BertConfig, length: int) -> tuple[int, ...]:
  """LSH buckets per round, as factors: `num_buckets`, or HF's choice for this length."""
  if cfg.num_buckets is not None:
    return cfg.num_buckets if isinstance(cfg.num_buckets, tuple) else (cfg.num_buckets,)
  chunk = cfg.lsh_attn_chunk_length
  power = (2 * (length // chunk)).bit_length() - 1
  limit = 2 * max(int((cfg.max_position_embeddings // chunk) ** 0.5), chunk)
  if 2 ** power > limit:
    return (2 ** (power // 2), 2 ** (power - power // 2))
  return (2 ** power,)


def look_adjacent(x, before: int, after: int):
  """[B, N, C, L, ...] -> [B, N, C, K, ...]: each chunk followed by its neighbours' items
  (chunk c - before ... c + after, wrapping around the chunk axis, as HF and trax do)."""
  if before == 0 and after == 0:
    return x
  return jnp.concatenate([jnp.roll(x, -i, axis=2) for i in range(-before, after + 1)],
                         axis=3)


def chunked(x, chunk: int):
  """[B, N, T, ...] -> [B, N, T / chunk, chunk, ...]."""
  return x.reshape(x.shape[:2] + (x.shape[2] // chunk, chunk) + x.shape[3:])


def softmax_attend(dots, values, rate: float, rng):
  """float32 dots [..., Q, K] -> (probs @ values [..., Q, D], log-sum-exp [..., Q])."""
  lse = jax.nn.logsumexp(dots, axis=-1, keepdims=True)
  probs = dropout(jnp.exp(dots - lse), rate, rng)
  out = jnp.einsum("...qk,...kd->...qd", probs.astype(values.dtype), values)
  return out, lse[..., 0]


def local_attention(cfg: BertConfig, query, key, value, mask, rng):
  """Chunked attention: [B, N, T, D] each, mask bool [B, T] -> [B, N, T, D]."""
  key = key / np.sqrt(cfg.head_dim).astype(np.float32)
  chunk, length = cfg.local_attn_chunk_length, query.shape[2]
  key_mask = mask[:, None, None, :]  # [B, 1, 1, T]
  if length > chunk:
    before, after = cfg.local_num_chunks_before, cfg.local_num_chunks_after
    query = chunked(query, chunk)  # [B, N, C, L, D]
    key = look_adjacent(chunked(key, chunk), before, after)  # [B, N, C, K, D]
    value = look_adjacent(chunked(value, chunk), before, after)
    key_mask = look_adjacent(chunked(mask[:, None, :], chunk), before, after)[..., None, :]
  dots = jnp.einsum("...qd,...kd->...qk", query, key, preferred_element_type=jnp.float32)
  dots = jnp.where(key_mask, dots, MASK_VALUE)
  out, _ = softmax_attend(dots, value, cfg.attention_probs_dropout_prob, rng)
  return out.reshape(out.shape[:2] + (length, -1))


def hash_vectors(cfg: BertConfig, vectors, rotations, mask):
  """[B, N, T, D] -> int buckets [B, N, R, T], each round's ids offset by its round
  (round r: r * (buckets + 1) ...); padding tokens get the extra last bucket of a round."""
  factors = bucket_factors(cfg, vectors.shape[2])
  rotated = jnp.einsum("bntd,ndhr->bnhtr", jax.lax.stop_gradient(vectors).astype(jnp.float32),
                       rotations.astype(jnp.float32))  # [B, N, R, T, sum(factors) / 2]
  buckets, start, product = 0, 0, 1
  for factor in factors:
    part = rotated[..., start:start + factor // 2]
    buckets = buckets + product * jnp.argmax(jnp.concatenate([part, -part], axis=-1), axis=-1)
    start, product = start + factor // 2, product * factor
  buckets = jnp.where(mask[:, None, None, :], buckets, product)  # padding: bucket `product`
  offsets = jnp.arange(cfg.num_hashes)[:, None] * (product + 1)  # [R, 1]
  return buckets + offsets


def length_normalised(x, epsilon: float = 1e-6):
  """x / rms(x) along the last axis, then / sqrt(D): LSH attention's keys."""
  x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + epsilon)
  return x / np.sqrt(x.shape[-1]).astype(np.float32)


def lsh_attention(cfg: BertConfig, query_key, value, mask, buckets, rng):
  """LSH attention of shared query/key vectors: [B, N, T, D] each, mask bool [B, T],
  buckets int [B, N, R, T] (`hash_vectors`) or None for rows no longer than a chunk
  (then it is full attention, still without a token's own key) -> [B, N, T, D]."""
  rate = cfg.lsh_attention_probs_dropout_prob
  b, n, length, d = query_key.shape
  key = length_normalised(query_key)
  if buckets is None:
    dots = jnp.einsum("bnqd,bnkd->bnqk", query_key, key, preferred_element_type=jnp.float32)
    dots = jnp.where(mask[:, None, None, :], dots, MASK_VALUE)
    dots = jnp.where(jnp.eye(length, dtype=bool), SELF_MASK_VALUE, dots)
    return softmax_attend(dots, value, rate, rng)[0]
  rounds, chunk = cfg.num_hashes, cfg.lsh_attn_chunk_length
  before, after = cfg.lsh_num_chunks_before, cfg.lsh_num_chunks_after
  order = jnp.argsort(buckets.reshape(b, n, rounds * length), axis=-1, stable=True)
  undo = jnp.argsort(order, axis=-1)  # [B, N, R T]: the inverse permutation
  positions = order % length  # each sorted item's token
  gather = lambda x: jnp.take_along_axis(x, positions[..., None], axis=2)  # noqa: E731
  query = chunked(gather(query_key), chunk)  # [B, N, C, L, D], C = R T / L
  keys, values = chunked(gather(key), chunk), chunked(gather(value), chunk)
  query_pos = chunked(positions, chunk)  # [B, N, C, L]
  valid = chunked(jnp.take_along_axis(  # [B, N, C, L]: each sorted item a real token
      jnp.broadcast_to(mask[:, None, :], (b, n, length)), positions, axis=-1), chunk)

  def attend(query, query_pos, key, value, key_pos, key_valid, rng):
    """Chunks [B, N, c, L, ...] and the keys they see [B, N, c, K, ...]."""
    dots = jnp.einsum("bncqd,bnckd->bncqk", query, key, preferred_element_type=jnp.float32)
    dots = jnp.where(key_valid[..., None, :], dots, MASK_VALUE)
    dots = jnp.where(query_pos[..., :, None] == key_pos[..., None, :], SELF_MASK_VALUE, dots)
    return softmax_attend(dots, value, rate, rng)  # [B, N, c, L, D], [B, N, c, L]

  groups, count = cfg.lsh_attention_groups, query.shape[2]
  if groups == 1:
    near = lambda x: look_adjacent(x, before, after)  # noqa: E731
    out, lse = attend(query, query_pos, near(keys), near(values), near(query_pos),
                      near(valid), rng)
  else:  # `groups` runs over count / groups chunks each; scores recomputed in the backward
    if count % groups:
      raise ValueError(f"BertConfig: lsh_attention_groups={groups} does not divide LSH "
                       f"attention's {count} chunks (num_hashes x length / "
                       "lsh_attn_chunk_length)")
    size = count // groups

    def near_group(x, start):  # chunks start ... start + size - 1, each with its neighbours
      ids = (start - before + jnp.arange(size + before + after)) % count  # wrapping, as
      window = jnp.take(x, ids, axis=2)                                   # look_adjacent
      return jnp.concatenate([window[:, :, i:i + size] for i in range(before + after + 1)],
                             axis=3)

    @jax.checkpoint
    def group(index):
      start = index * size
      own = lambda x: jax.lax.dynamic_slice_in_dim(x, start, size, axis=2)  # noqa: E731
      return attend(own(query), own(query_pos), near_group(keys, start),
                    near_group(values, start), near_group(query_pos, start),
                    near_group(valid, start),
                    None if rng is None else jax.random.fold_in(rng, index))

    out, lse = jax.lax.map(group, jnp.arange(groups))  # [G, B, N, c, L, ...]
    out, lse = (jnp.moveaxis(x, 0, 2).reshape(x.shape[1:3] + (count,) + x.shape[4:])
                for x in (out, lse))
  out = jnp.take_along_axis(out.reshape(b, n, rounds * length, d), undo[..., None], axis=2)
  lse = jnp.take_along_axis(lse.reshape(b, n, rounds * length), undo, axis=2)
  out, lse = out.reshape(b, n, rounds, length, d), lse.reshape(b, n, rounds, length, 1)
  weights = jnp.exp(lse - jax.nn.logsumexp(lse, axis=2, keepdims=True))  # rounds' weights
  return jnp.sum(out * weights.astype(out.dtype), axis=2)
