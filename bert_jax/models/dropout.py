"""Dropout for the whole family: the inverted-dropout function and module every encoder uses,
its keep-masks from threefry words computed in-line, and the rng a former `nn.Dropout`
place in the module tree drew (`DropoutRng`), so masks (and losses) stay where they were.

Inverted dropout whose keep-mask comes from 16 random bits per element, two elements per
32-bit threefry word (paired along the last axis, so every other axis keeps its
sharding and every mesh draws the same mask). jax.random.bernoulli spends a whole
threefry evaluation per element, and on CPU those evaluations were a quarter of the
BERT-base step (bench/dropout_masks.py). The price: the rate is applied in steps of
1/65,536 (0.1 -> 0.1000061); kept values are scaled by 1 / (the keep probability
actually drawn), so every activation keeps its expectation exactly.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_KEEP_LEVELS = 1 << 16


def dropout_keep_mask(rng, rate: float, shape) -> tuple[jax.Array, float]:
  """(mask: bool[shape], True where kept; the probability of True), for 0 <= rate < 1."""
  if not shape:
    raise ValueError("dropout needs an array of at least one axis")
  threshold = round((1.0 - rate) * _KEEP_LEVELS)
  last = shape[-1]
  words = random_words(rng, (*shape[:-1], (last + 1) // 2))
  # Each word's low 16 bits, then its high 16 (a little-endian bitcast's order).
  halves = jnp.stack([words & 0xFFFF, words >> 16], axis=-1)  # [..., ceil(last / 2), 2]
  halves = halves.reshape(*shape[:-1], 2 * words.shape[-1])[..., :last]
  return halves < threshold, threshold / _KEEP_LEVELS


_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)  # Threefry-2x32's, round r uses r % 8


def _threefry2x32(k0, k1, x0, x1):
  """Threefry-2x32, 20 rounds (Salmon et al. 2011, "Parallel random numbers: as easy as
  1, 2, 3"): the counter pair (x0, x1) under the key (k0, k1); uint32 arrays that
  broadcast. Written out round by round, so XLA fuses it into the loop that uses it."""
  ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
  x0, x1 = x0 + ks[0], x1 + ks[1]
  for r in range(20):
    rot = _ROTATIONS[r % 8]
    x0 = x0 + x1
    x1 = ((x1 << np.uint32(rot)) | (x1 >> np.uint32(32 - rot))) ^ x0
    if r % 4 == 3:  # a key injection after every 4 rounds
      s = r // 4 + 1
      x0 = x0 + ks[s % 3]
      x1 = x1 + ks[(s + 1) % 3] + np.uint32(s)
  return x0, x1


def random_words(rng, shape) -> jax.Array:
  """uint32[shape]: jax.random.bits(rng, shape, jnp.uint32), the same bits for a threefry
  key (JAX's default, its partitionable counters: element i hashes the counter (0, i) and
  keeps the XOR of the two outputs), computed by `_threefry2x32` above. JAX lowers threefry
  on CPU as a 5-step while loop whose every step writes its arrays out; written out here it
  fuses with the dropout mask that reads it. Other keys go to jax.random.bits."""
  size = int(np.prod(shape))
  typed = jnp.issubdtype(rng.dtype, jax.dtypes.prng_key)
  impl = str(jax.random.key_impl(rng)) if typed else jax.config.jax_default_prng_impl
  if ("threefry" not in impl or size >= 2 ** 32
      or not jax.config.jax_threefry_partitionable):
    return jax.random.bits(rng, shape, jnp.uint32)
  key = jax.random.key_data(rng) if typed else rng
  strides = np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]  # row-major, the last axis 1
  index = sum(jax.lax.broadcasted_iota(jnp.uint32, shape, axis) * np.uint32(stride)
              for axis, stride in enumerate(strides))  # each element's flat index
  out0, out1 = _threefry2x32(key[0], key[1], np.uint32(0), index)
  return out0 ^ out1


def dropout(x, rate: float, rng):
  """x with each element zeroed with probability `rate` (the module docstring) and the kept ones
  scaled up to keep the expectation; x itself when rate is 0 or there is no rng."""
  if rate == 0.0 or rng is None:
    return x
  if rate >= 1.0:
    return jnp.zeros_like(x)
  keep, keep_prob = dropout_keep_mask(rng, rate, x.shape)
  return jnp.where(keep, x / jnp.asarray(keep_prob, x.dtype), jnp.zeros_like(x))


class Dropout(nn.Module):
  """`dropout` as a module drawing from the "dropout" rng collection: nn.Dropout's
  interface (and its auto-name, Dropout_N), with the cheaper mask above."""
  rate: float

  @nn.compact
  def __call__(self, x, deterministic: bool):
    if deterministic or self.rate == 0.0:
      return x
    return dropout(x, self.rate, self.make_rng("dropout"))


class DropoutRng(nn.Module):
  """The rng an `nn.Dropout` module at this place in the tree would draw: named as that
  module was ("Dropout_0"), so attention dropout keeps the masks (and so the losses) it
  had before the attention core moved into `dot_product_attention`. Each call draws the
  next, as each call of that module did."""

  @nn.compact
  def __call__(self):
    return self.make_rng("dropout")
