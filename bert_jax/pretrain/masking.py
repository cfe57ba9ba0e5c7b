"""Dynamic MLM masking, in the tf.data graph, reproducible per (seed, epoch, example).

Per example: the eligible tokens are those that are not special ([CLS], [SEP], [PAD]); k =
min(max_predictions_per_seq, max(1, round(masked_lm_prob * eligible))) of them are chosen
uniformly; of the chosen, mask_token_prob become [MASK], random_token_prob a random
vocabulary token (drawn from `replacement_ids`, which leaves out [PAD]/[CLS]/[SEP]/[MASK]
and the [unusedN] slots), and the rest are kept. Outputs take the MLM head's fixed-size
sparse layout (B batch, T max_seq_length, P max_predictions_per_seq):

  input_ids            int32   [B, T]  with the replacements applied
  masked_lm_positions  int32   [B, P]  chosen positions, ascending; 0 in unused slots
  masked_lm_ids        int32   [B, P]  the original ids at those positions; 0 in unused slots
  masked_lm_weights    float32 [B, P]  1.0 for a real prediction, 0.0 for an unused slot

Which tokens are chosen is the selector's (`SELECTORS`, picked by config.data.masking): it
gets the eligible tokens, one uniform score per position and the budget k, and returns the
chosen positions; the 80/10/10 replacement and the output layout are the same for all.
A new masking scheme is one function plus one entry in SELECTORS.

"token" (BERT): the k eligible tokens with the highest scores, i.e. a uniform k-subset.

"whole_word" (as in Google's whole-word-masking BERT releases): a WordPiece continuation
piece ("##...", per `continuation_table`) belongs to the word of the piece before it,
and words are chosen instead of pieces: in a uniformly random order, each word is taken whole if its pieces still fit in the k budget, else skipped (the order and
skip rule of google-research/bert's create_pretraining_data.py). The 80/10/10 choice stays
per piece, as there. A continuation piece right after a special token starts a word of
its own (a segment truncated mid-word).

Randomness: `mask_batch` is a pure function of its uniform `noise`, and `example_noise`
draws each example's noise from a counter-based generator keyed by (seed, epoch, global
example index), vectorized over the batch (a per-example tf.random.stateless_uniform
under tf.map_fn was 4x slower). So an example's masks depend on nothing but
(seed, epoch, example index): not on batch size, process count, or where a run resumed,
and each epoch draws new ones.
"""
import dataclasses

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class MaskingOptions:
  """The rates come from config.data; the ids from the tokenizer's vocabulary."""
  max_predictions_per_seq: int
  mask_id: int
  special_ids: tuple[int, ...]  # never selected: [PAD], [CLS], [SEP] (and [MASK])
  replacement_ids: np.ndarray   # int32 [R]: what a "random token" is drawn from
  masked_lm_prob: float = 0.15
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1  # kept = 1 - mask_token_prob - random_token_prob
  selector: str = "token"  # a name in SELECTORS (config.data.masking)
  continuation_table: np.ndarray | None = None  # bool [V]: id is a "##" piece

  def __post_init__(self):
    if self.max_predictions_per_seq < 1:
      raise ValueError(
          f"max_predictions_per_seq must be >= 1, got {self.max_predictions_per_seq}")
    if not 0.0 < self.masked_lm_prob <= 1.0:
      raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
    if (min(self.mask_token_prob, self.random_token_prob) < 0.0
        or self.mask_token_prob + self.random_token_prob > 1.0 + 1e-9):
      raise ValueError(
          "mask_token_prob and random_token_prob must be >= 0 and sum to <= 1, got "
          f"{self.mask_token_prob} and {self.random_token_prob}")
    if len(self.replacement_ids) == 0:
      raise ValueError("replacement_ids is empty")
    if self.selector not in SELECTORS:
      raise ValueError(f"config.data.masking={self.selector!r}: expected one of "
                       f"{sorted(SELECTORS)}")
    if SELECTORS[self.selector].needs_word_pieces and (
        self.continuation_table is None or not np.any(self.continuation_table)):
      raise ValueError(f"config.data.masking={self.selector!r} needs a WordPiece vocabulary "
                       "with '##' continuation pieces, and this tokenizer's has none (word "
                       "boundaries of SentencePiece vocabularies are not supported yet)")


def replacement_ids_from_vocab(vocab: list[str]) -> np.ndarray:
  """Ids of the ordinary tokens: everything except bracketed ones ([PAD], [unused3], ...)."""
  return np.array([i for i, token in enumerate(vocab)
                   if not (token.startswith("[") and token.endswith("]"))], np.int32)


def continuation_table_from_vocab(vocab: list[str]) -> np.ndarray:
  """bool [V]: True for WordPiece continuation pieces ("##ing")."""
  return np.array([token.startswith("##") for token in vocab], bool)


def noise_size(seq_length: int, options: MaskingOptions) -> int:
  """Uniform draws one example needs: T selection scores, P actions, P replacements."""
  return seq_length + 2 * options.max_predictions_per_seq


def example_noise(seed: int, epoch: tf.Tensor, example_index: tf.Tensor, size: int) -> tf.Tensor:
  """Uniform [0, 1) noise float32 [B, size], a pure function of (seed, epoch, index [B]).

  SplitMix64 (Steele, Lea and Flood, 2014), vectorized over the batch: the example's key
  is mix(mix(seed * gamma + epoch) + index * gamma); its j-th draw is
  mix(key + j * gamma), of which the top 24 bits make the float. All arithmetic is uint64.
  """
  gamma = tf.constant(_GOLDEN_GAMMA, tf.uint64)
  seed_key = _splitmix_mix(tf.constant(seed, tf.uint64) * gamma + tf.cast(epoch, tf.uint64))
  keys = _splitmix_mix(seed_key + tf.cast(example_index, tf.uint64) * gamma)       # [B]
  counters = tf.range(1, size + 1, dtype=tf.int64)                                 # [size]
  states = keys[:, None] + tf.cast(counters, tf.uint64)[None, :] * gamma            # [B, size]
  top_24_bits = tf.bitwise.right_shift(_splitmix_mix(states), tf.constant(40, tf.uint64))
  return tf.cast(top_24_bits, tf.float32) * (1.0 / (1 << 24))


_GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def _splitmix_mix(z: tf.Tensor) -> tf.Tensor:
  """SplitMix64's output function, elementwise on uint64."""
  for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(shift, tf.uint64)))
    z = z * tf.constant(multiplier, tf.uint64)
  return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, tf.constant(31, tf.uint64)))


def mask_batch(input_ids: tf.Tensor, noise: tf.Tensor, options: MaskingOptions) -> dict:
  """input_ids int32 [B, T], noise [B, noise_size] -> the masked fields (module docstring)."""
  predictions = options.max_predictions_per_seq
  seq_length = input_ids.shape[1]
  selection_scores, action_draws, replacement_draws = tf.split(
      noise, [seq_length, predictions, predictions], axis=1)

  eligible = tf.reduce_all(
      input_ids[:, :, None] != tf.constant(options.special_ids, tf.int32), axis=-1)  # [B, T]
  num_eligible = tf.reduce_sum(tf.cast(eligible, tf.int32), axis=1)                  # [B]
  num_selected = tf.cast(tf.round(options.masked_lm_prob * tf.cast(num_eligible, tf.float32)),
                         tf.int32)
  num_selected = tf.minimum(tf.maximum(num_selected, 1), predictions)
  num_selected = tf.minimum(num_selected, num_eligible)                              # [B]

  selected = SELECTORS[options.selector].select(
      input_ids, eligible, selection_scores, num_selected, options)                # [B, T]
  num_selected = tf.reduce_sum(tf.cast(selected, tf.int32), axis=1)                 # [B]
  is_prediction = tf.range(predictions)[None, :] < num_selected[:, None]            # [B, P]
  in_order = tf.sort(tf.where(selected, tf.range(seq_length)[None, :], seq_length), axis=1)
  positions = tf.where(is_prediction, _pad_last_axis(in_order[:, :predictions], predictions), 0)
  original_ids = tf.gather(input_ids, positions, batch_dims=1)                      # [B, P]

  replacement_table = tf.constant(options.replacement_ids, tf.int32)
  table_size = int(replacement_table.shape[0])
  random_ids = tf.gather(replacement_table, tf.minimum(
      tf.cast(replacement_draws * table_size, tf.int32), table_size - 1))
  to_mask = action_draws < options.mask_token_prob
  to_random = ~to_mask & (action_draws < options.mask_token_prob + options.random_token_prob)
  new_ids = tf.where(to_mask, options.mask_id, tf.where(to_random, random_ids, original_ids))

  batch_index = tf.broadcast_to(tf.range(tf.shape(input_ids)[0])[:, None], tf.shape(positions))
  scatter_at = tf.boolean_mask(tf.stack([batch_index, positions], axis=-1), is_prediction)
  masked_input_ids = tf.tensor_scatter_nd_update(
      input_ids, scatter_at, tf.boolean_mask(new_ids, is_prediction))
  return {
      "input_ids": masked_input_ids,
      "masked_lm_positions": positions,
      "masked_lm_ids": tf.where(is_prediction, original_ids, 0),
      "masked_lm_weights": tf.cast(is_prediction, tf.float32),
  }


# ------------------------------------------------------------------------ selectors
# Each: (input_ids int32 [B, T], eligible bool [B, T], scores float32 [B, T] uniform,
#        budget int32 [B] (<= eligible count), options) -> selected bool [B, T].
def _token_selection(input_ids, eligible, scores, budget, options):
  """bool [B, T]: the `budget` highest-scoring eligible tokens (a uniform subset)."""
  seq_length = input_ids.shape[1]
  k = min(options.max_predictions_per_seq, seq_length)
  _, top_positions = tf.math.top_k(tf.where(eligible, scores, -1.0), k=k)           # [B, K]
  taken = tf.range(k)[None, :] < budget[:, None]                                    # [B, K]
  hits = tf.one_hot(top_positions, seq_length, on_value=True, off_value=False,
                    dtype=tf.bool) & taken[:, :, None]                              # [B, K, T]
  return tf.reduce_any(hits, axis=1)


def _whole_word_selection(input_ids, eligible, scores, budget, options):
  """bool [B, T]: whole words taken greedily in score order while their pieces fit `budget`
  [B]. A word's score is its first piece's, so the order is uniformly random."""
  batch, seq_length = tf.shape(input_ids)[0], input_ids.shape[1]
  continuation = tf.gather(tf.constant(options.continuation_table), input_ids)      # [B, T]
  follows_eligible = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
  word_start = eligible & ~(continuation & follows_eligible)
  word_index = tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1                # [B, T]
  # Per-word arrays [B, W=T] through segment ops; ineligible pieces go to a spare segment.
  segment = tf.where(eligible, tf.range(batch)[:, None] * seq_length + word_index,
                     batch * seq_length)
  num_segments = batch * seq_length + 1
  word_size = tf.reshape(tf.math.unsorted_segment_sum(
      tf.cast(eligible, tf.int32), segment, num_segments)[:-1], [batch, seq_length])
  word_score = tf.reshape(tf.math.unsorted_segment_max(
      tf.where(word_start, scores, -1.0), segment, num_segments)[:-1], [batch, seq_length])
  word_score = tf.where(word_size > 0, word_score, -2.0)                           # no word
  order = tf.argsort(word_score, axis=1, direction="DESCENDING", stable=True)     # [B, W]
  size_in_order = tf.gather(word_size, order, batch_dims=1)

  def take_if_it_fits(carry, size):  # one rank of the order, for every row at once
    used, _ = carry
    take = (size > 0) & (used + size <= budget)
    return used + tf.where(take, size, 0), take
  _, taken_in_order = tf.scan(take_if_it_fits, tf.transpose(size_in_order),
                              initializer=(tf.zeros_like(budget), tf.zeros_like(budget, bool)))
  taken_in_order = tf.transpose(taken_in_order)                                    # [B, W]
  taken_word = tf.gather(taken_in_order, tf.argsort(order, axis=1), batch_dims=1)  # [B, W]
  return eligible & tf.gather(taken_word, tf.maximum(word_index, 0), batch_dims=1)


@dataclasses.dataclass(frozen=True)
class Selector:
  select: object  # the function, as above
  needs_word_pieces: bool = False  # reads continuation_table ("##" pieces)


SELECTORS = {
    "token": Selector(_token_selection),
    "whole_word": Selector(_whole_word_selection, needs_word_pieces=True),
}


def _pad_last_axis(values: tf.Tensor, size: int) -> tf.Tensor:
  missing = size - values.shape[-1]
  return values if missing <= 0 else tf.pad(values, [[0, 0], [0, missing]])
