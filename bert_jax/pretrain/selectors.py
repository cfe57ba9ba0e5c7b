"""The masking selectors: which tokens an example's MLM masks, by scheme (config.data.masking).

`bert_jax.pretrain.masking` describes each scheme ("token", "whole_word", "ngram", "span",
and ERNIE's "phrase", "entity", "mixture") and applies the chosen positions; a selector only
chooses them. A new masking scheme is one function here plus one entry in SELECTORS.

Shape legend: B batch, T sequence length, P max_predictions_per_seq, D a selector's draws.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.text import spans as spans_lib


# ------------------------------------------------------------------------ selectors
# Each: (input_ids int32 [B, T], eligible bool [B, T], draws float32 [B, D] uniform (D =
#        its Selector.draws(T, P)), budget int32 [B] (<= eligible count), options)
#        -> Selection(selected bool [B, T], unit_start int32 [B, T]).
class Selection(NamedTuple):
  selected: tf.Tensor    # bool [B, T]: the chosen tokens
  unit_start: tf.Tensor  # int32 [B, T]: at the first token of each unit drawn (token, word,
                         # n-gram, span) a number > 0 that grows with the draw order; else 0


def _token_selection(input_ids, eligible, scores, budget, options):
  """The `budget` highest-scoring eligible tokens (a uniform subset); each its own unit."""
  seq_length = input_ids.shape[1]
  k = min(options.max_predictions_per_seq, seq_length)
  _, top_positions = tf.math.top_k(tf.where(eligible, scores, -1.0), k=k)           # [B, K]
  rank = tf.where(tf.range(k)[None, :] < budget[:, None], tf.range(1, k + 1)[None, :], 0)
  batch = tf.broadcast_to(tf.range(tf.shape(input_ids)[0])[:, None], tf.shape(top_positions))
  # top_k's positions are distinct in a row: the scatter's sum writes each rank once.
  unit_start = tf.scatter_nd(tf.stack([batch, top_positions], axis=-1), rank,
                             tf.shape(input_ids))                                    # [B, T]
  return Selection(unit_start > 0, unit_start)


class _Words(NamedTuple):
  """A row's words (W = T slots, empty ones of size 0)."""
  start: tf.Tensor   # bool [B, T]: the piece starts a word
  index: tf.Tensor   # int32 [B, T]: the piece's word (-1 before the first word)
  size: tf.Tensor    # int32 [B, W]: pieces per word
  score: tf.Tensor   # float32 [B, W]: the draw at the word's first piece; -2 for no word


def _vocabulary_word_starts(input_ids, eligible, options) -> tf.Tensor:
  """bool [B, T]: the eligible pieces that start a word (every one without a table)."""
  if options.continuation_table is None:
    return eligible
  continuation = tf.gather(tf.constant(options.continuation_table), input_ids)      # [B, T]
  follows_eligible = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
  return eligible & ~(continuation & follows_eligible)


def _words(input_ids, eligible, scores, options, word_start=None) -> _Words:
  """The row's words: the vocabulary's, or the units that start at `word_start` [B, T]."""
  batch, seq_length = tf.shape(input_ids)[0], input_ids.shape[1]
  if word_start is None:
    word_start = _vocabulary_word_starts(input_ids, eligible, options)
  word_index = tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1                # [B, T]
  # Per-word arrays [B, W=T] through segment ops; ineligible pieces go to a spare segment.
  segment = tf.where(eligible, tf.range(batch)[:, None] * seq_length + word_index,
                     batch * seq_length)
  num_segments = batch * seq_length + 1
  word_size = tf.reshape(tf.math.unsorted_segment_sum(
      tf.cast(eligible, tf.int32), segment, num_segments)[:-1], [batch, seq_length])
  word_score = tf.reshape(tf.math.unsorted_segment_max(
      tf.where(word_start, scores, -1.0), segment, num_segments)[:-1], [batch, seq_length])
  return _Words(word_start, word_index, word_size,
                tf.where(word_size > 0, word_score, -2.0))


def _pieces_of_words(words: _Words, eligible, taken_word) -> tf.Tensor:
  """taken_word bool [B, W] -> bool [B, T]: the eligible pieces of those words."""
  return eligible & tf.gather(taken_word, tf.maximum(words.index, 0), batch_dims=1)


def _random_word_order(words: _Words) -> tf.Tensor:
  """order int32 [B, W]: words by descending score, the empty ones last."""
  return tf.argsort(words.score, axis=1, direction="DESCENDING", stable=True)


def _whole_word_selection(input_ids, eligible, scores, budget, options):
  """Whole words taken greedily in score order while their pieces fit `budget` [B]. A
  word's score is its first piece's, so the order is uniformly random."""
  return _whole_units(_words(input_ids, eligible, scores, options), eligible, budget,
                      options.max_predictions_per_seq)


def _whole_units(words: _Words, eligible, budget, predictions: int) -> Selection:
  """Whole units (`words`) taken greedily in score order while they fit `budget` [B].

  The greedy pass reads the 2P best-scoring words (P = predictions >= budget): a row takes
  at most P words and most words fit, so its budget is met within them. Only when a row's
  budget is unmet there and more words follow is the pass rerun over all W words: the
  selection is the full pass's either way, and the full sort is rarely paid for."""
  num_slots = words.size.shape[1]
  few = min(num_slots, 2 * predictions)

  def greedy(k):  # word_value int32 [B, W]: rank + 1 at the words taken, else 0; unmet [B]
    _, order = tf.math.top_k(words.score, k=k)  # ties: the lower index first (stable)
    size_in_order = tf.gather(words.size, order, batch_dims=1)                    # [B, k]
    slot = tf.range(k)[None, :]

    def step(rank, used, taken):  # one rank of the order, for every row at once
      size = size_in_order[:, rank]
      take = (size > 0) & (used + size <= budget)
      return rank + 1, used + tf.where(take, size, 0), taken | ((slot == rank) & take[:, None])

    def any_left(rank, used, _):  # a rank once every row's budget is met takes nothing
      return (rank < k) & tf.reduce_any(
          (used < budget) & (tf.gather(size_in_order, tf.minimum(rank, k - 1), axis=1) > 0))

    _, used, taken = tf.while_loop(any_left, step, (tf.constant(0), tf.zeros_like(budget),
                                                    tf.zeros_like(size_in_order, bool)))
    rows = tf.broadcast_to(tf.range(tf.shape(order)[0])[:, None], tf.shape(order))
    word_value = tf.scatter_nd(tf.stack([rows, order], axis=-1),
                               tf.where(taken, slot + 1, 0), tf.shape(words.size))
    more_words = tf.reduce_sum(tf.cast(words.size > 0, tf.int32), axis=1) > k
    return word_value, (used < budget) & more_words

  word_value, unmet = greedy(few)
  if few < num_slots:
    word_value = tf.cond(tf.reduce_any(unmet), lambda: greedy(num_slots)[0],
                         lambda: word_value)
  return Selection(_pieces_of_words(words, eligible, word_value > 0),
                   _unit_start(words, word_value))


def _unit_start(words: _Words, word_value) -> tf.Tensor:
  """word_value int32 [B, W] -> int32 [B, T]: each word's value at its first piece, else 0."""
  return tf.where(words.start, tf.gather(word_value, tf.maximum(words.index, 0),
                                         batch_dims=1), 0)


# Helpers of the n-gram and span selectors' loops: each records the slot every attempt drew
# (_attempts, _numbered); the span loop carries a running count [B, X] (_at, _rises).
def _at(values, index):
  """values [B, X] at index [B], clipped to [0, X)."""
  return tf.gather(values, tf.clip_by_value(index, 0, values.shape[1] - 1), batch_dims=1)


def _rises(upto):
  """[B, X] -> [B, X]: each entry's step over the one before (the first's over 0)."""
  return upto - tf.pad(upto[:, :-1], [[0, 0], [1, 0]])


def _attempts(size: int) -> tf.TensorArray:
  """Per attempt of a selector's loop, the slot [B] it drew from (-1: none)."""
  return tf.TensorArray(tf.int32, size=size, element_shape=[None])


def _numbered(slots: tf.TensorArray, attempts, shape) -> tf.Tensor:
  """int32 `shape` [B, X]: at each slot an attempt drew from (_attempts), the number
  (1-based) of the last attempt that drew from it; 0 elsewhere."""
  drawn_at = tf.transpose(slots.stack()[:attempts])                                # [B, A]
  drawn = drawn_at >= 0
  number = tf.broadcast_to(tf.range(1, attempts + 1)[None, :], tf.shape(drawn_at))
  row = tf.broadcast_to(tf.range(tf.shape(drawn_at)[0])[:, None], tf.shape(drawn_at))
  where = tf.boolean_mask(tf.stack([row, tf.maximum(drawn_at, 0)], axis=-1), drawn)
  return tf.tensor_scatter_nd_max(tf.zeros(shape, tf.int32), where,
                                  tf.boolean_mask(number, drawn))


NGRAM_PROBS = np.array([1.0, 1.0 / 2, 1.0 / 3]) / (1.0 + 1.0 / 2 + 1.0 / 3)  # 6/11 3/11 2/11


def _ngram_selection(input_ids, eligible, draws, budget, options):
  """ALBERT's n-gram masking (module docstring). draws [B, 2T]: the word order scores and
  the n draws, each read at a word's first piece."""
  seq_length = input_ids.shape[1]
  order_scores, n_draws = tf.split(draws, 2, axis=1)
  words = _words(input_ids, eligible, order_scores, options)
  order = _random_word_order(words)
  max_n = len(NGRAM_PROBS)
  cdf = tf.constant(np.cumsum(NGRAM_PROBS)[:-1], tf.float32)
  first_piece = tf.sort(tf.where(words.start, tf.range(seq_length)[None, :], seq_length - 1),
                        axis=1)                                                     # [B, W]
  word_n_draw = tf.gather(n_draws, first_piece, batch_dims=1)
  word_n = 1 + tf.reduce_sum(tf.cast(word_n_draw[:, :, None] >= cdf, tf.int32), -1)  # [B, W]
  # Pieces in words [w, w + k): size_ends[:, w + k] - size_ends[:, w].
  size_ends = tf.pad(tf.cumsum(words.size, axis=1), [[0, 0], [1, max_n]])          # [B, W+1+n]
  grams = tf.range(1, max_n + 1)[None, :]                                           # [1, n]

  # The loop reads and writes `covered` [B, W + n] only at the n slots from the rank's word
  # (gathers and a scatter of [B, n]); the n slots past W stay False.
  batch = tf.broadcast_to(tf.range(tf.shape(input_ids)[0])[:, None], tf.shape(order[:, :max_n]))

  def step(rank, used, covered, taken_at):  # the rank's candidate word w [B], every row at once
    w = order[:, rank]
    exists = tf.gather(words.size, w, batch_dims=1) > 0
    n = tf.gather(word_n, w, batch_dims=1)
    first = tf.gather(size_ends, w, batch_dims=1)
    slots = w[:, None] + grams - 1                                                   # [B, n]
    sizes = tf.gather(size_ends, slots + 1, batch_dims=1) - first[:, None]           # [B, n]
    fits = (grams <= n[:, None]) & (used[:, None] + sizes <= budget[:, None])
    k = tf.reduce_max(tf.where(fits, grams, 0), axis=1)                              # [B]
    in_gram = grams <= k[:, None]
    covered_now = tf.gather(covered, slots, batch_dims=1)                            # [B, n]
    take = exists & (used < budget) & (k > 0) & ~tf.reduce_any(in_gram & covered_now, 1)
    size = tf.gather(sizes, tf.maximum(k - 1, 0), batch_dims=1)
    newly = in_gram & take[:, None] & (slots < seq_length)
    covered = tf.tensor_scatter_nd_update(covered, tf.stack([batch, slots], axis=-1),
                                          covered_now | newly)
    return (rank + 1, used + tf.where(take, size, 0), covered,
            taken_at.write(rank, tf.where(take, w, -1)))

  # Ranks in order until every row's budget is met (ALBERT stops there too).
  ranks, _, covered, taken_at = tf.while_loop(
      lambda rank, used, *_: (rank < seq_length) & tf.reduce_any(used < budget), step,
      (tf.constant(0), tf.zeros_like(budget),
       tf.zeros([tf.shape(input_ids)[0], seq_length + max_n], tf.bool), _attempts(seq_length)))
  return Selection(_pieces_of_words(words, eligible, covered[:, :seq_length]),
                   _unit_start(words, _numbered(taken_at, ranks, tf.shape(words.size))))


SPAN_GEOMETRIC_P = 0.2
SPAN_MAX_WORDS = 10
SPAN_LENGTH_PROBS = SPAN_GEOMETRIC_P * (1 - SPAN_GEOMETRIC_P) ** np.arange(SPAN_MAX_WORDS)
SPAN_LENGTH_PROBS /= SPAN_LENGTH_PROBS.sum()  # P(l) for l = 1..10; mean 3.78


def _span_selection(input_ids, eligible, draws, budget, options):
  """SpanBERT's span masking (module docstring). draws [B, 2P]: per attempt a (P of them,
  each adds >= 1 piece until the budget is met) an anchor draw and a length draw.

  An attempt anchors on a uniformly drawn free piece, covers whole words from the anchor's
  word on (at most `length` of them, not past its segment's end) and takes the first of
  their free pieces up to the row's remaining budget. The loop carries one [B, T] array:
  `free_upto`, the free eligible pieces at or before each position (its last column the
  free count). The anchor is where it first reaches the drawn rank (a binary search); the
  attempt's words are one range of positions, found by gathers at [B]; the pieces it takes
  are the free ones whose rank within the range is 1..added, so they leave free_upto as
  free_upto - clip(rank within the range, 0, added): three elementwise ops an attempt and
  no sort or scan inside the loop. The chosen pieces are where free_upto stops rising."""
  predictions = options.max_predictions_per_seq
  seq_length = input_ids.shape[1]
  anchor_draws, length_draws = tf.split(draws, 2, axis=1)
  words = _words(input_ids, eligible, tf.zeros_like(input_ids, tf.float32), options)
  position = tf.range(seq_length)[None, :]
  segment = tf.cumsum(tf.cast(~eligible, tf.int32), axis=1)  # runs between special tokens
  # [B, T]: the k-th word's first position, and the k-th ineligible position (T past the
  # last): a segment s ends at the s-th ineligible position (0-based).
  word_first = tf.sort(tf.where(words.start, position, seq_length), axis=1)
  segment_end = tf.sort(tf.where(eligible, seq_length, position), axis=1)
  cdf = tf.constant(np.cumsum(SPAN_LENGTH_PROBS)[:-1], tf.float32)
  lengths = 1 + tf.reduce_sum(tf.cast(length_draws[:, :, None] >= cdf, tf.int32), axis=2)

  def step(number, free_upto, remaining, first_pieces):
    num_free = free_upto[:, -1]
    rank = tf.minimum(tf.cast(anchor_draws[:, number] * tf.cast(num_free, tf.float32),
                              tf.int32), num_free - 1)
    anchor = tf.searchsorted(free_upto, (rank + 1)[:, None], side="left")[:, 0]     # [B]
    anchor_word = _at(words.index, anchor)
    start = _at(word_first, anchor_word)
    end_word = anchor_word + lengths[:, number]
    end = tf.minimum(tf.where(end_word < seq_length, _at(word_first, end_word), seq_length),
                     _at(segment_end, _at(segment, anchor)))       # [start, end): the words
    before = tf.where(start > 0, _at(free_upto, start - 1), 0)
    added = tf.where(remaining > 0,
                     tf.minimum(remaining, _at(free_upto, end - 1) - before), 0)
    taken_upto = tf.clip_by_value(free_upto - before[:, None], 0, added[:, None])
    return (number + 1, free_upto - taken_upto, remaining - added,
            first_pieces.write(number, tf.where(remaining > 0, start, -1)))

  # An attempt after every row's budget is met changes nothing, so the loop stops there:
  # each attempt adds at least one piece and spans average 3.78 words, so the budget is
  # usually met long before the P attempts are used up.
  def unmet(number, free_upto, remaining, first_pieces):
    return (number < predictions) & tf.reduce_any(remaining > 0)

  free_upto = tf.cumsum(tf.cast(eligible, tf.int32), axis=1)
  attempts, free_upto, _, first_pieces = tf.while_loop(
      unmet, step, (tf.constant(0), free_upto, budget, _attempts(predictions)))
  # The chosen pieces are where free_upto stopped rising; each drawn span's first piece
  # gets its attempt's number (a later attempt's over an earlier's at the same piece).
  return Selection(eligible & tf.equal(_rises(free_upto), 0),
                   _numbered(first_pieces, attempts, tf.shape(input_ids)))


def _knowledge_selection(kind: str):
  """ERNIE's phrase- or entity-level masking (module docstring): whole units, each an
  annotated span of `kind` or else a word, greedily in a uniformly random order."""
  multiplier = spans_lib.SPAN_KINDS[kind]

  def select(input_ids, eligible, scores, budget, options, span_tags):
    code = (span_tags // multiplier) % 3                                             # [B, T]
    before = tf.pad(code[:, :-1], [[0, 0], [1, 0]])
    follows_eligible = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
    continues_unit = follows_eligible & (before != spans_lib.OUTSIDE)
    vocabulary_start = _vocabulary_word_starts(input_ids, eligible, options)
    start = eligible & tf.where(
        code == spans_lib.INSIDE, ~continues_unit,
        vocabulary_start | (code == spans_lib.BEGIN) | (before != spans_lib.OUTSIDE))
    return _whole_units(_words(input_ids, eligible, scores, options, start), eligible, budget,
                        options.max_predictions_per_seq)
  return select


def _mixture_draws(seq_length: int, predictions: int) -> list[int]:
  """Each scheme's slice of a mixture's draws (after the one that picks the scheme)."""
  return [selector.draws(seq_length, predictions) for name, selector in SELECTORS.items()
          if name != "mixture"]


def _mixture_selection(input_ids, eligible, draws, budget, options, span_tags):
  """Per example one scheme of options.mixture, drawn by weight (module docstring)."""
  seq_length = input_ids.shape[1]
  names = [name for name in SELECTORS if name != "mixture"]
  pick, *own = tf.split(draws, [1] + _mixture_draws(seq_length,
                                                    options.max_predictions_per_seq), axis=1)
  weights = np.array([weight for _, weight in options.mixture])
  cdf = tf.constant(np.cumsum(weights)[:-1] / weights.sum(), tf.float32)
  chosen = tf.reduce_sum(tf.cast(pick >= cdf[None, :], tf.int32), axis=1)          # [B]
  selected = tf.zeros_like(eligible)
  unit_start = tf.zeros_like(input_ids)
  for member, (name, _) in enumerate(options.mixture):
    selector = SELECTORS[name]
    extra = {"span_tags": span_tags} if selector.reads_spans else {}
    selection = selector.select(input_ids, eligible, own[names.index(name)], budget, options,
                                **extra)
    row = (chosen == member)[:, None]
    selected = tf.where(row, selection.selected, selected)
    unit_start = tf.where(row, selection.unit_start, unit_start)
  return Selection(selected, unit_start)


@dataclasses.dataclass(frozen=True)
class Selector:
  select: Callable  # the function, as above
  draws: Callable[[int, int], int] = lambda seq_length, predictions: seq_length  # D(T, P)
  needs_words: bool = False  # reads continuation_table
  per_span_action: bool = False  # one 80/10/10 decision per span, not per piece
  reads_spans: bool = False  # takes the rows' span_tags [B, T] (text/spans.py)


SELECTORS = {
    "token": Selector(_token_selection),
    "whole_word": Selector(_whole_word_selection, needs_words=True),
    "ngram": Selector(_ngram_selection, draws=lambda t, p: 2 * t, needs_words=True),
    "span": Selector(_span_selection, draws=lambda t, p: 2 * p, needs_words=True,
                     per_span_action=True),
    "phrase": Selector(_knowledge_selection("phrase"), reads_spans=True),
    "entity": Selector(_knowledge_selection("entity"), reads_spans=True),
    "mixture": Selector(_mixture_selection, draws=lambda t, p: 1 + sum(_mixture_draws(t, p)),
                        reads_spans=True),
}
