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

Which tokens are chosen is the selector's (`bert_jax.pretrain.selectors.SELECTORS`, picked
by config.data.masking): it gets the eligible tokens, its uniform draws and the budget k,
and returns the chosen positions and where each unit it drew (a token, word, n-gram or
span) starts; the 80/10/10 replacement and the output layout are the same for all. A new
masking scheme is one function plus one entry in selectors.SELECTORS.

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
from __future__ import annotations

import dataclasses

import numpy as np

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.pretrain.selectors import SELECTORS
from bert_jax.text.bpe import BPETokenizer
from bert_jax.text.sentencepiece_vocab import SentencePieceTokenizer
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
)


def continuation_table_for(tokenizer) -> np.ndarray:
  """bool [V]: which pieces continue a word: the tokenizer's own `continuation_table()`
  where it gives one (tokenizer.json's, a kind added from outside), else by its class
  (WORD_RULES)."""
  own = tokenizer.continuation_table()
  if own is not None:
    return own
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
  spans = _spans(positions, is_prediction, seq_length)

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


def _spans(positions: tf.Tensor, is_prediction: tf.Tensor,
           seq_length: int) -> dict[str, tf.Tensor]:
  """Each prediction's span, a maximal run of chosen tokens: positions int32 [B, P] (the
  chosen tokens of rows of seq_length, ascending), is_prediction bool [B, P] -> left,
  right, offset, first_slot int32 [B, P] (first_slot: the slot of the span's first
  prediction). Unused slots hold junk. Every chosen token has a slot, so a run is a run of
  slots whose positions step by one: position - slot is the same along a run and grows
  between runs, and a run's first and last slots are where that key's first and last
  copies sit (two binary searches over the P slots, in place of sorting the T positions)."""
  slot = tf.range(tf.shape(positions)[1])[None, :]
  key = tf.where(is_prediction, positions - slot, tf.int32.max)                     # [B, P]
  first_slot = tf.searchsorted(key, key, side="left")
  last_slot = tf.minimum(tf.searchsorted(key, key, side="right"), tf.shape(key)[1]) - 1
  start = tf.gather(positions, first_slot, batch_dims=1)
  end = tf.gather(positions, last_slot, batch_dims=1)
  return {"left": start - 1, "right": tf.minimum(end + 1, seq_length - 1),
          "offset": positions - start, "first_slot": first_slot}


def _pad_last_axis(values: tf.Tensor, size: int) -> tf.Tensor:
  missing = size - values.shape[-1]
  return values if missing <= 0 else tf.pad(values, [[0, 0], [0, missing]])
