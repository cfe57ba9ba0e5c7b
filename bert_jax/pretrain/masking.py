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
gets the eligible tokens, its uniform draws and the budget k, and returns the chosen
positions and where each unit it drew (a token, word, n-gram or span) starts; the 80/10/10
replacement and the output layout are the same for all. A new masking scheme is one
function plus one entry in SELECTORS.

Words. A piece continues the word of the piece before it per `continuation_table` (bool
[V]), which comes from the tokenizer's kind (`continuation_table_for`): WordPiece "##"
pieces (BERT); for SentencePiece (ALBERT, "\u2581" = a word start) and byte-level BPE
(RoBERTa, "\u0120" = a leading space) every piece without the marker, as fairseq's
whole-word masks decide (so BPE's punctuation without a space joins the word before it,
and a packed sentence's first word, which has no leading space, joins the word before it).
A continuation piece right after a special token starts a word of its own (a segment
truncated mid-word).

"token" (BERT): the k eligible tokens with the highest draws, i.e. a uniform k-subset.

"whole_word" (as in Google's whole-word-masking BERT releases): words instead of pieces:
in a uniformly random order, each word is taken whole if its pieces still fit in the k
budget, else skipped (the order and skip rule of google-research/bert's
create_pretraining_data.py). The 80/10/10 choice stays per piece, as there.

"ngram" (ALBERT, google-research/albert's create_pretraining_data.py): in a uniformly
random order of the words, each word starts an n-gram of n words, n <= 3 drawn with
p(n) proportional to 1/n (6/11, 3/11, 2/11); if it does not fit in what is left of the
budget, n - 1, ... 1 words are tried; it is skipped when none fits or any of its words is
taken already; until the budget is met. As there, n-grams run over the row's words in
order, across a [SEP] (ALBERT's candidate list skips [CLS]/[SEP]). 80/10/10 per piece.

"span" (SpanBERT, facebookresearch/SpanBERT's PairWithSpanMaskingScheme): until the k
budget is met, a span length l in words is drawn from a geometric distribution (p = 0.2)
truncated to 1..10 and renormalised (mean 3.78), an anchor uniformly among the eligible
tokens not chosen yet (the reference draws among all and redraws a chosen one: the same
distribution), and the span covers l words from the anchor's word start, stopping at a
special token, the row's end or when the budget is met (mid-word if need be, as there).
Overlapping or touching spans merge into one (the reference's merge_intervals), and the
80/10/10 decision is taken once per merged span ("replacement=span").

"phrase" and "entity" (ERNIE's knowledge masking, Sun et al. 2019): the units are the
annotated phrases (or entities) of the row, each whole, and outside them the words (or
the tokens, for a vocabulary without word marks); they are taken greedily in a uniformly
random order while they fit the budget, as "whole_word" takes words. The annotations come
from the corpus's span files (text/spans.py), laid out by the example builder as
`span_tags` [B, T] beside the ids; an annotated unit cut by the row's start or a special
token starts again after it. 80/10/10 per piece.

"mixture" (ERNIE's stages mixed): each example is masked by one of the schemes of
`MaskingOptions.mixture` ((name, weight), ...; config.data.masking_mixture, e.g.
"token:1,phrase:1,entity:1": basic, phrase-level and entity-level masking), drawn with
those weights; 80/10/10 per piece.

Span fields (MaskingOptions.span_fields, for the span boundary objective and inspect), P
slots each, 0 in unused slots. A span is a maximal run of contiguous chosen tokens (with
"span" masking exactly SpanBERT's merged spans; for the other selectors the same rule):
  masked_lm_span_left    int32 [B, P]  the position before the prediction's span (x_{s-1})
  masked_lm_span_right   int32 [B, P]  the position after it (x_{e+1}; at most T - 1)
  masked_lm_span_offset  int32 [B, P]  the prediction's position within its span, from 0
  masked_lm_unit_start   int32 [B, P]  k > 0 where the prediction starts a unit the
                                       selector drew (token, word, n-gram, span), k growing
                                       with the draw order; else 0 (inspect counts n-gram /
                                       span lengths by it, leaving out each row's last unit,
                                       the one the budget may cut)

Randomness: `mask_batch` is a pure function of its uniform `noise`, and `example_noise`
draws each example's noise from a counter-based generator keyed by (seed, epoch, global
example index), vectorized over the batch (a per-example tf.random.stateless_uniform
under tf.map_fn was 4x slower). So an example's masks depend on nothing but
(seed, epoch, example index): not on batch size, process count, or where a run resumed,
and each epoch draws new ones.
"""
import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from bert_jax.text import spans as spans_lib
from bert_jax.text.bpe import BPETokenizer
from bert_jax.text.sentencepiece_vocab import SentencePieceTokenizer
from bert_jax.text.tokenizer_json import TokenizerJson
from bert_jax.text.wordpiece import WordPieceTokenizer


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
  continuation_table: np.ndarray | None = None  # bool [V]: the piece continues a word
  span_fields: bool = False  # also output the span fields (module docstring)
  mixture: tuple[tuple[str, float], ...] = ()  # "mixture": (selector, weight) per scheme
  span_tags: bool = False  # the rows carry span tags (config.data.spans; text/spans.py)

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
    members = self.selectors()
    for name in members:
      if name not in SELECTORS or name == "mixture":
        raise ValueError(f"config.data.masking_mixture names {name!r}: expected one of "
                         f"{sorted(set(SELECTORS) - {'mixture'})}")
    if self.selector == "mixture" and (not members or min(w for _, w in self.mixture) <= 0):
      raise ValueError("config.data.masking='mixture' needs masking_mixture 'name:weight,...' "
                       f"with weights > 0, got {self.mixture}")
    for name in members:
      if SELECTORS[name].needs_words and (
          self.continuation_table is None or not np.any(self.continuation_table)):
        raise ValueError(f"config.data.masking={name!r} needs word boundaries, and "
                         "this vocabulary has no pieces that continue a word ('##' in "
                         "WordPiece; pieces without '\u2581' / '\u0120' in SentencePiece / BPE)")
      if SELECTORS[name].reads_spans and not self.span_tags:
        raise ValueError(f"config.data.masking={name!r} masks annotated units: it needs "
                         "config.data.spans=True and span files beside the corpus "
                         "(bert_jax/text/spans.py)")

  def selectors(self) -> tuple[str, ...]:
    """The schemes that choose tokens: the mixture's members, or the one selector."""
    return tuple(name for name, _ in self.mixture) if self.selector == "mixture" else (
        self.selector,)


def parse_mixture(text: str) -> tuple[tuple[str, float], ...]:
  """config.data.masking_mixture "token:1,phrase:1,entity:2" -> ((name, weight), ...)."""
  mixture = []
  for item in filter(None, (part.strip() for part in text.split(","))):
    name, colon, weight = item.partition(":")
    try:
      mixture.append((name.strip(), float(weight) if colon else 1.0))
    except ValueError:
      raise ValueError(f"config.data.masking_mixture={text!r}: {item!r} is not "
                       "name:weight") from None
  return tuple(mixture)


def replacement_ids_from_vocab(vocab: list[str]) -> np.ndarray:
  """Ids of the ordinary tokens: everything except bracketed ones ([PAD], [unused3], ...)
  and ids no token uses (a tokenizer.json's gaps, "")."""
  return np.array([i for i, token in enumerate(vocab)
                   if token and not (token.startswith("[") and token.endswith("]"))], np.int32)


def continuation_table_from_vocab(vocab: list[str]) -> np.ndarray:
  """bool [V]: True for WordPiece continuation pieces ("##ing")."""
  return np.array([token.startswith("##") for token in vocab], bool)


def _unmarked_pieces(marker: str):
  """The rule of vocabularies that mark word starts: every other piece continues a word
  (bracketed special pieces such as <unk> or [UNK] stand alone)."""
  def table(vocab: list[str]) -> np.ndarray:
    return np.array([not (token.startswith(marker) or _is_bracketed(token))
                     for token in vocab], bool)
  return table


def _is_bracketed(token: str) -> bool:
  return len(token) > 2 and (token[0], token[-1]) in (("[", "]"), ("<", ">"))


# The tokenizer kind -> its continuation table (module docstring).
WORD_RULES = (
    (WordPieceTokenizer, lambda tok: continuation_table_from_vocab(list(tok.vocab))),
    (SentencePieceTokenizer, lambda tok: _unmarked_pieces("\u2581")(list(tok.vocab))),
    (BPETokenizer, lambda tok: _unmarked_pieces("\u0120")(list(tok.vocab))),
    (TokenizerJson, lambda tok: tok.continuation_table()),  # by the file's model
)


def continuation_table_for(tokenizer) -> np.ndarray:
  """bool [V]: which pieces continue a word, by the tokenizer's kind (WORD_RULES)."""
  for kind, rule in WORD_RULES:
    if isinstance(tokenizer, kind):
      return rule(tokenizer)
  raise ValueError(f"no word-boundary rule for a {type(tokenizer).__name__}; expected one "
                   f"of {[kind.__name__ for kind, _ in WORD_RULES]}")


def noise_size(seq_length: int, options: MaskingOptions) -> int:
  """Uniform draws one example needs: the selector's, P actions, P replacements."""
  predictions = options.max_predictions_per_seq
  return SELECTORS[options.selector].draws(seq_length, predictions) + 2 * predictions


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


def mask_batch(input_ids: tf.Tensor, noise: tf.Tensor, options: MaskingOptions,
               span_tags: tf.Tensor | None = None) -> dict:
  """input_ids int32 [B, T], noise [B, noise_size] -> the masked fields (module docstring).
  span_tags: int [B, T], the rows' span tags (text/spans.py), for the schemes reading them."""
  predictions = options.max_predictions_per_seq
  seq_length = input_ids.shape[1]
  selector = SELECTORS[options.selector]
  selector_draws, action_draws, replacement_draws = tf.split(
      noise, [selector.draws(seq_length, predictions), predictions, predictions], axis=1)

  eligible = tf.reduce_all(
      input_ids[:, :, None] != tf.constant(options.special_ids, tf.int32), axis=-1)  # [B, T]
  num_eligible = tf.reduce_sum(tf.cast(eligible, tf.int32), axis=1)                  # [B]
  num_selected = tf.cast(tf.round(options.masked_lm_prob * tf.cast(num_eligible, tf.float32)),
                         tf.int32)
  num_selected = tf.minimum(tf.maximum(num_selected, 1), predictions)
  num_selected = tf.minimum(num_selected, num_eligible)                              # [B]

  extra = {}
  if selector.reads_spans:
    extra["span_tags"] = None if span_tags is None else tf.cast(span_tags, tf.int32)
  selected, unit_start = selector.select(
      input_ids, eligible, selector_draws, num_selected, options, **extra)         # [B, T]
  num_selected = tf.reduce_sum(tf.cast(selected, tf.int32), axis=1)                 # [B]
  is_prediction = tf.range(predictions)[None, :] < num_selected[:, None]            # [B, P]
  in_order = tf.sort(tf.where(selected, tf.range(seq_length)[None, :], seq_length), axis=1)
  positions = tf.where(is_prediction, _pad_last_axis(in_order[:, :predictions], predictions), 0)
  original_ids = tf.gather(input_ids, positions, batch_dims=1)                      # [B, P]
  spans = _spans(selected, positions)

  replacement_table = tf.constant(options.replacement_ids, tf.int32)
  table_size = int(replacement_table.shape[0])
  random_ids = tf.gather(replacement_table, tf.minimum(
      tf.cast(replacement_draws * table_size, tf.int32), table_size - 1))
  if selector.per_span_action:  # each prediction takes its span's first prediction's draw
    action_draws = tf.gather(action_draws, spans["first_slot"], batch_dims=1)
  to_mask = action_draws < options.mask_token_prob
  to_random = ~to_mask & (action_draws < options.mask_token_prob + options.random_token_prob)
  new_ids = tf.where(to_mask, options.mask_id, tf.where(to_random, random_ids, original_ids))

  batch_index = tf.broadcast_to(tf.range(tf.shape(input_ids)[0])[:, None], tf.shape(positions))
  scatter_at = tf.boolean_mask(tf.stack([batch_index, positions], axis=-1), is_prediction)
  masked_input_ids = tf.tensor_scatter_nd_update(
      input_ids, scatter_at, tf.boolean_mask(new_ids, is_prediction))
  out = {
      "input_ids": masked_input_ids,
      "masked_lm_positions": positions,
      "masked_lm_ids": tf.where(is_prediction, original_ids, 0),
      "masked_lm_weights": tf.cast(is_prediction, tf.float32),
  }
  if options.span_fields:
    unit_start = tf.where(is_prediction, tf.gather(unit_start, positions, batch_dims=1), 0)
    out.update({
        "masked_lm_span_left": tf.where(is_prediction, spans["left"], 0),
        "masked_lm_span_right": tf.where(is_prediction, spans["right"], 0),
        "masked_lm_span_offset": tf.where(is_prediction, spans["offset"], 0),
        "masked_lm_unit_start": unit_start,
    })
  return out


SPAN_FIELDS = ("masked_lm_span_left", "masked_lm_span_right", "masked_lm_span_offset",
               "masked_lm_unit_start")


def _spans(selected: tf.Tensor, positions: tf.Tensor) -> dict[str, tf.Tensor]:
  """Each prediction's span, a maximal run of chosen tokens: selected bool [B, T],
  positions int32 [B, P] (ascending) -> left, right, offset, first_slot int32 [B, P]
  (first_slot: the slot of the span's first prediction). Unused slots hold junk."""
  seq_length = selected.shape[1]
  before = tf.pad(selected[:, :-1], [[0, 0], [1, 0]])
  after = tf.pad(selected[:, 1:], [[0, 0], [0, 1]])
  position = tf.range(seq_length)[None, :]
  starts = tf.sort(tf.where(selected & ~before, position, seq_length), axis=1)      # [B, T]
  ends = tf.sort(tf.where(selected & ~after, position, seq_length), axis=1)         # [B, T]
  run_index = tf.maximum(tf.cumsum(tf.cast(selected & ~before, tf.int32), axis=1) - 1, 0)
  run = tf.gather(run_index, positions, batch_dims=1)                               # [B, P]
  start = tf.gather(starts, run, batch_dims=1)
  end = tf.gather(ends, run, batch_dims=1)
  slot_of_position = tf.cumsum(tf.cast(selected, tf.int32), axis=1) - 1             # [B, T]
  first_slot = tf.gather(slot_of_position, tf.minimum(start, seq_length - 1), batch_dims=1)
  return {"left": start - 1, "right": tf.minimum(end + 1, seq_length - 1),
          "offset": positions - start, "first_slot": tf.maximum(first_slot, 0)}


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
  taken = tf.range(k)[None, :] < budget[:, None]                                    # [B, K]
  hits = tf.one_hot(top_positions, seq_length, on_value=True, off_value=False,
                    dtype=tf.bool) & taken[:, :, None]                              # [B, K, T]
  rank = tf.range(1, k + 1)[None, :, None]
  return Selection(tf.reduce_any(hits, axis=1), tf.reduce_max(tf.where(hits, rank, 0), 1))


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


def _random_word_order(words: _Words) -> tuple[tf.Tensor, tf.Tensor]:
  """(order int32 [B, W]: words by descending score, the empty ones last; its inverse)."""
  order = tf.argsort(words.score, axis=1, direction="DESCENDING", stable=True)
  return order, tf.argsort(order, axis=1)


def _whole_word_selection(input_ids, eligible, scores, budget, options):
  """Whole words taken greedily in score order while their pieces fit `budget` [B]. A
  word's score is its first piece's, so the order is uniformly random."""
  return _whole_units(_words(input_ids, eligible, scores, options), eligible, budget)


def _whole_units(words: _Words, eligible, budget) -> Selection:
  """Whole units (`words`) taken greedily in score order while they fit `budget` [B]."""
  order, inverse = _random_word_order(words)
  size_in_order = tf.gather(words.size, order, batch_dims=1)

  def take_if_it_fits(carry, size):  # one rank of the order, for every row at once
    used, _ = carry
    take = (size > 0) & (used + size <= budget)
    return used + tf.where(take, size, 0), take
  _, taken_in_order = tf.scan(take_if_it_fits, tf.transpose(size_in_order),
                              initializer=(tf.zeros_like(budget), tf.zeros_like(budget, bool)))
  taken_word = tf.gather(tf.transpose(taken_in_order), inverse, batch_dims=1)     # [B, W]
  return Selection(_pieces_of_words(words, eligible, taken_word),
                   _unit_start(words, tf.where(taken_word, inverse + 1, 0)))


def _unit_start(words: _Words, word_value) -> tf.Tensor:
  """word_value int32 [B, W] -> int32 [B, T]: each word's value at its first piece, else 0."""
  return tf.where(words.start, tf.gather(word_value, tf.maximum(words.index, 0),
                                         batch_dims=1), 0)


NGRAM_PROBS = np.array([1.0, 1.0 / 2, 1.0 / 3]) / (1.0 + 1.0 / 2 + 1.0 / 3)  # 6/11 3/11 2/11


def _ngram_selection(input_ids, eligible, draws, budget, options):
  """ALBERT's n-gram masking (module docstring). draws [B, 2T]: the word order scores and
  the n draws, each read at a word's first piece."""
  seq_length = input_ids.shape[1]
  order_scores, n_draws = tf.split(draws, 2, axis=1)
  words = _words(input_ids, eligible, order_scores, options)
  order, _ = _random_word_order(words)
  max_n = len(NGRAM_PROBS)
  cdf = tf.constant(np.cumsum(NGRAM_PROBS)[:-1], tf.float32)
  first_piece = tf.sort(tf.where(words.start, tf.range(seq_length)[None, :], seq_length - 1),
                        axis=1)                                                     # [B, W]
  word_n_draw = tf.gather(n_draws, first_piece, batch_dims=1)
  word_n = 1 + tf.reduce_sum(tf.cast(word_n_draw[:, :, None] >= cdf, tf.int32), -1)  # [B, W]
  # Pieces in words [w, w + k): size_ends[:, w + k] - size_ends[:, w].
  size_ends = tf.pad(tf.cumsum(words.size, axis=1), [[0, 0], [1, max_n]])          # [B, W+1+n]
  word_slot = tf.range(seq_length)[None, :]                                         # [1, W]

  def step(rank, used, covered, starts):  # the rank's candidate word w [B], every row at once
    w = order[:, rank]
    exists = tf.gather(words.size, w[:, None], batch_dims=1)[:, 0] > 0
    n = tf.gather(word_n, w[:, None], batch_dims=1)[:, 0]
    first = tf.gather(size_ends, w[:, None], batch_dims=1)[:, 0]
    sizes = tf.gather(size_ends, w[:, None] + tf.range(1, max_n + 1)[None, :],
                      batch_dims=1) - first[:, None]                                # [B, n]
    fits = ((tf.range(1, max_n + 1)[None, :] <= n[:, None])
            & (used[:, None] + sizes <= budget[:, None]))
    k = tf.reduce_max(tf.where(fits, tf.range(1, max_n + 1)[None, :], 0), axis=1)  # [B]
    in_gram = (word_slot >= w[:, None]) & (word_slot < (w + k)[:, None])            # [B, W]
    clash = tf.reduce_any(in_gram & covered, axis=1)
    take = exists & (used < budget) & (k > 0) & ~clash
    size = tf.gather(sizes, tf.maximum(k - 1, 0)[:, None], batch_dims=1)[:, 0]
    return (rank + 1, used + tf.where(take, size, 0), covered | (in_gram & take[:, None]),
            tf.where((word_slot == w[:, None]) & take[:, None], rank + 1, starts))

  # Ranks in order until every row's budget is met (ALBERT stops there too).
  no_words = tf.zeros_like(words.size, bool)
  _, _, covered, starts = tf.while_loop(
      lambda rank, used, *_: (rank < seq_length) & tf.reduce_any(used < budget), step,
      (tf.constant(0), tf.zeros_like(budget), no_words, tf.zeros_like(words.size)))
  return Selection(_pieces_of_words(words, eligible, covered), _unit_start(words, starts))


SPAN_GEOMETRIC_P = 0.2
SPAN_MAX_WORDS = 10
SPAN_LENGTH_PROBS = SPAN_GEOMETRIC_P * (1 - SPAN_GEOMETRIC_P) ** np.arange(SPAN_MAX_WORDS)
SPAN_LENGTH_PROBS /= SPAN_LENGTH_PROBS.sum()  # P(l) for l = 1..10; mean 3.78


def _span_selection(input_ids, eligible, draws, budget, options):
  """SpanBERT's span masking (module docstring). draws [B, 2P]: per attempt a (P of them,
  each adds >= 1 piece until the budget is met) an anchor draw and a length draw."""
  predictions = options.max_predictions_per_seq
  anchor_draws, length_draws = tf.split(draws, 2, axis=1)
  words = _words(input_ids, eligible, tf.zeros_like(input_ids, tf.float32), options)
  segment = tf.cumsum(tf.cast(~eligible, tf.int32), axis=1)  # runs between special tokens
  cdf = tf.constant(np.cumsum(SPAN_LENGTH_PROBS)[:-1], tf.float32)

  def step(carry, attempt):
    chosen, starts = carry
    anchor_draw, length_draw, number = attempt                                       # [B]
    remaining = budget - tf.reduce_sum(tf.cast(chosen, tf.int32), axis=1)
    free = eligible & ~chosen
    num_free = tf.reduce_sum(tf.cast(free, tf.int32), axis=1)
    rank = tf.minimum(tf.cast(anchor_draw * tf.cast(num_free, tf.float32), tf.int32),
                      num_free - 1)
    anchor = free & (tf.cumsum(tf.cast(free, tf.int32), axis=1) - 1 == rank[:, None])
    anchor_word = tf.reduce_sum(tf.where(anchor, words.index, 0), axis=1)
    anchor_segment = tf.reduce_sum(tf.where(anchor, segment, 0), axis=1)
    length = 1 + tf.reduce_sum(tf.cast(length_draw[:, None] >= cdf, tf.int32), axis=1)
    in_span = (eligible & (segment == anchor_segment[:, None])
               & (words.index >= anchor_word[:, None])
               & (words.index < (anchor_word + length)[:, None]))
    new = in_span & ~chosen
    new_before = tf.cumsum(tf.cast(new, tf.int32), axis=1, exclusive=True)
    active = (remaining > 0)[:, None]
    covered = in_span & (new_before < remaining[:, None]) & active
    first = in_span & words.start & (words.index == anchor_word[:, None]) & active
    return chosen | covered, tf.where(first, number + 1, starts)

  chosen, starts = tf.foldl(
      step, (tf.transpose(anchor_draws), tf.transpose(length_draws), tf.range(predictions)),
      initializer=(tf.zeros_like(eligible), tf.zeros_like(input_ids)))
  return Selection(chosen, starts)


def _knowledge_selection(kind: str):
  """ERNIE's phrase- or entity-level masking (module docstring): whole units, each an
  annotated span of `kind` or else a word, greedily in a uniformly random order."""
  multiplier = spans_lib.KINDS[kind]

  def select(input_ids, eligible, scores, budget, options, span_tags):
    code = (span_tags // multiplier) % 3                                             # [B, T]
    before = tf.pad(code[:, :-1], [[0, 0], [1, 0]])
    follows_eligible = tf.pad(eligible[:, :-1], [[0, 0], [1, 0]])
    continues_unit = follows_eligible & (before != spans_lib.OUTSIDE)
    vocabulary_start = _vocabulary_word_starts(input_ids, eligible, options)
    start = eligible & tf.where(
        code == spans_lib.INSIDE, ~continues_unit,
        vocabulary_start | (code == spans_lib.BEGIN) | (before != spans_lib.OUTSIDE))
    return _whole_units(_words(input_ids, eligible, scores, options, start), eligible, budget)
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


def _pad_last_axis(values: tf.Tensor, size: int) -> tf.Tensor:
  missing = size - values.shape[-1]
  return values if missing <= 0 else tf.pad(values, [[0, 0], [0, missing]])
