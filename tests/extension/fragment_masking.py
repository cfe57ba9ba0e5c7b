"""A masking scheme added from outside the package: MASS's fragment (Song et al. 2019).

Each row masks ONE contiguous fragment of its k-token budget: among the row's eligible
tokens (special tokens skipped, so a fragment may run across a [SEP]), the fragment
starts at a uniformly drawn eligible token with k - 1 eligible tokens after it, and
takes those k. The 80/10/10 replacement stays per piece. Registered as
`bert_jax.pretrain.selectors.SELECTORS[NAME] = SELECTOR` (config.data.masking=fragment).

Shape legend: B batch, T sequence length.
"""
import tensorflow as tf

from bert_jax.pretrain import selectors

NAME = "fragment"  # config.data.masking


def fragment_selection(input_ids, eligible, draws, budget, options):
  """input_ids int32 [B, T], eligible bool [B, T], draws float32 [B, 1], budget int32 [B]
  -> Selection: the k = budget eligible tokens from a uniform start, one unit each row."""
  del input_ids, options
  rank = tf.cumsum(tf.cast(eligible, tf.int32), axis=1) - 1                       # [B, T]
  count = tf.reduce_sum(tf.cast(eligible, tf.int32), axis=1)                       # [B]
  starts = tf.maximum(count - budget + 1, 1)                                       # [B]
  start = tf.minimum(tf.cast(draws[:, 0] * tf.cast(starts, tf.float32), tf.int32), starts - 1)
  selected = eligible & (rank >= start[:, None]) & (rank < (start + budget)[:, None])
  first = selected & (rank == start[:, None])
  return selectors.Selection(selected, tf.cast(first, tf.int32))


SELECTOR = selectors.Selector(fragment_selection, draws=lambda seq_length, predictions: 1)

