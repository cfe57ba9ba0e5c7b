"""SQuAD postprocessing: start/end logits per window -> answer texts -> official scores.

API:
  postprocess(start_logits, end_logits, metadata, n_best_size=20,
              max_answer_length=30) -> SquadPredictions
      start_logits, end_logits: float [F, T], rows in the order of the features that
      squad.featurize returned with `metadata`.
  SquadPredictions.answers(null_score_diff_threshold=0.0) -> {qid: text}
  score(logits, metadata, n_best_size=20, max_answer_length=30,
        null_score_diff_threshold=0.0) -> dict
      logits: {"start_logits": [F, T], "end_logits": [F, T]}. v1.1: evaluate-v1.1.py's
      exact_match and f1. v2.0: evaluate-v2.0.py's exact/f1 (+ HasAns_/NoAns_), with
      the null answer chosen where null_score_diff > threshold, and best_exact/best_f1
      with the thresholds (on null_score_diff) that reach them on this set.

The span search is BERT run_squad's write_predictions: per window, the n_best_size
highest start and end logits (ties in position order) make candidate spans; a span is
kept if both ends lie in the context, its start piece has max context in this window,
end >= start and it spans at most max_answer_length pieces. Candidates from all
windows are ranked by start + end logit; the best n_best_size distinct texts form the
n-best list. v2.0 adds the null candidate (the window with the lowest [CLS] start+end
score) and null_score_diff = null score - best non-null span score.

Final text: the predicted pieces are detokenized (the tokenizer's `span_text`: WordPiece's
'##' glued, byte-level BPE's and SentencePiece's own decoding) and looked up in the
tokenizer's normalised words of the original words they came from; the match is
projected back, character by character ignoring whitespace, onto the original
context, so casing, accents and spacing are those of the context (as BERT's
get_final_text). When that fails (e.g. [UNK] pieces or normalisation that changes the
character count), the whole original words are returned.
"""
import dataclasses
import unicodedata

import numpy as np

from bert_jax.finetune import metrics
from bert_jax.finetune.squad_reader import SquadMetadata
from bert_jax.finetune.squad_reader import WHITESPACE


@dataclasses.dataclass(frozen=True)
class NbestEntry:
  text: str
  probability: float  # Softmax of start + end logits over the n-best list.
  start_logit: float
  end_logit: float


@dataclasses.dataclass
class SquadPredictions:
  best_text: dict[str, str]          # Best non-null answer per question id.
  null_score_diff: dict[str, float]  # v2.0 only: null score - best non-null score.
  nbest: dict[str, list[NbestEntry]]
  version_2: bool

  def answers(self, null_score_diff_threshold: float = 0.0) -> dict[str, str]:
    """Final answers: v2.0 answers "" where null_score_diff exceeds the threshold."""
    if not self.version_2:
      return dict(self.best_text)
    return {qid: "" if self.null_score_diff[qid] > null_score_diff_threshold else text
            for qid, text in self.best_text.items()}


# ------------------------------------------------------------------------------------
# Final text.
# ------------------------------------------------------------------------------------
class _NormalizedWords:
  """The tokenizer's normalised words of every context word (one batched call)."""

  def __init__(self, metadata: SquadMetadata):
    contexts = metadata.contexts
    flat = metadata.tokenizer.normalized_words([w for c in contexts for w in c.words])
    self._words, start = [], 0
    for context in contexts:
      self._words.append(flat[start:start + len(context.words)])
      start += len(context.words)

  def joined(self, context_index: int, first_word: int, last_word: int) -> str:
    words = self._words[context_index][first_word:last_word + 1]
    return " ".join(w for word in words for w in word)


_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})  # Removed by the tokenizer.


def _is_unseen(char: str, drop_marks: bool) -> bool:
  """Whether the tokenizer drops `char` (whitespace, controls, stripped accents)."""
  if char.isascii():
    return char.isspace() or not char.isprintable()
  category = unicodedata.category(char)
  return (char in WHITESPACE or char.isspace() or category in _UNSEEN_CATEGORIES
          or (drop_marks and category == "Mn"))


def _alignable(text: str, drop_marks: bool) -> tuple[str, list[int]]:
  """(text without the characters the tokenizer drops, position of each kept one)."""
  kept = [i for i, c in enumerate(text) if not _is_unseen(c, drop_marks)]
  return "".join(text[i] for i in kept), kept


def project_to_original(pred_text: str, normalized_text: str, original_text: str,
                        strips_accents: bool = True) -> str:
  """The part of original_text that pred_text (found in normalized_text) came from.

  normalized_text is the tokenizer's words of original_text joined by spaces;
  strips_accents tells whether the tokenizer dropped the text's accents.
  """
  start = normalized_text.find(pred_text)
  if not pred_text or start < 0:
    return original_text
  normalized_positions = [i for i, c in enumerate(normalized_text) if c != " "]
  bare_normalized = normalized_text.replace(" ", "")
  bare_original, original_positions = _alignable(original_text, strips_accents)
  if len(bare_normalized) != len(bare_original):
    return original_text
  to_bare = {position: i for i, position in enumerate(normalized_positions)}
  end = start + len(pred_text) - 1
  if start not in to_bare or end not in to_bare:
    return original_text
  first, last = original_positions[to_bare[start]], original_positions[to_bare[end]]
  return original_text[first:last + 1]


def _final_text(metadata: SquadMetadata, normalized: _NormalizedWords, feature: int,
                start: int, end: int, context_index: int) -> str:
  """The answer text of pieces [start, end] of a feature, in the context's characters."""
  pred_text = metadata.tokenizer.span_text(metadata.input_ids[feature, start:end + 1])
  first_word = int(metadata.token_to_word[feature, start])
  last_word = int(metadata.token_to_word[feature, end])
  context = metadata.contexts[context_index]
  original_text = context.text[
      context.word_starts[first_word]:
      context.word_starts[last_word] + len(context.words[last_word])]
  return project_to_original(
      pred_text, normalized.joined(context_index, first_word, last_word), original_text,
      metadata.tokenizer.strips_accents)


# ------------------------------------------------------------------------------------
# N-best span search.
# ------------------------------------------------------------------------------------
def _top_indices(logits: np.ndarray, count: int) -> np.ndarray:
  """Positions of the `count` largest logits, ties in position order."""
  return np.argsort(-logits, kind="stable")[:count]


def _softmax(scores: list[float]) -> list[float]:
  scores = np.asarray(scores, np.float64)
  exp = np.exp(scores - scores.max())
  return list(exp / exp.sum())


def _example_candidates(features, start_logits, end_logits, metadata, n_best_size,
                        max_answer_length):
  """Candidate spans of one example's features, in BERT's order, and the null one.

  Returns (candidates: rows of (feature, start, end, start_logit, end_logit) sorted by
  score, null: (feature, start logit, end logit) of the lowest [CLS] score).
  """
  rows, null = [], None
  for f in features:
    starts = _top_indices(start_logits[f], n_best_size)
    ends = _top_indices(end_logits[f], n_best_size)
    null_score = start_logits[f, 0] + end_logits[f, 0]
    if null is None or null_score < null[1] + null[2]:
      null = (f, start_logits[f, 0], end_logits[f, 0])
    start_grid, end_grid = (g.ravel() for g in np.meshgrid(starts, ends, indexing="ij"))
    keep = ((metadata.token_to_word[f, start_grid] >= 0)
            & (metadata.token_to_word[f, end_grid] >= 0)
            & metadata.token_is_max_context[f, start_grid]
            & (end_grid >= start_grid) & (end_grid - start_grid + 1 <= max_answer_length))
    for s, e in zip(start_grid[keep], end_grid[keep]):
      rows.append((f, int(s), int(e), start_logits[f, s], end_logits[f, e]))
  if metadata.version_2:
    rows.append((null[0], 0, 0, null[1], null[2]))
  order = np.argsort([-(row[3] + row[4]) for row in rows], kind="stable")
  return [rows[i] for i in order], null


def postprocess(start_logits, end_logits, metadata: SquadMetadata, n_best_size: int = 20,
                max_answer_length: int = 30) -> SquadPredictions:
  """N-best answers per question from window logits; see the module docstring."""
  start_logits = np.asarray(start_logits, np.float64)
  end_logits = np.asarray(end_logits, np.float64)
  expected = metadata.input_ids.shape
  if start_logits.shape != expected or end_logits.shape != expected:
    raise ValueError(f"Expected start/end logits of shape {expected}, got "
                     f"{start_logits.shape} and {end_logits.shape}.")
  features_of = [[] for _ in metadata.examples]
  for f, e in enumerate(metadata.feature_example_index):
    features_of[e].append(f)
  normalized = _NormalizedWords(metadata)
  best_text, null_score_diff, all_nbest = {}, {}, {}
  for e, example in enumerate(metadata.examples):
    candidates, null = _example_candidates(features_of[e], start_logits, end_logits,
                                           metadata, n_best_size, max_answer_length)
    nbest, seen = [], set()
    for f, s, end, start_logit, end_logit in candidates:
      if len(nbest) >= n_best_size:
        break
      text = (_final_text(metadata, normalized, f, s, end,
                          int(metadata.example_context[e])) if s > 0 else "")
      if text not in seen:
        seen.add(text)
        nbest.append((text, start_logit, end_logit))
    if metadata.version_2 and "" not in seen:
      nbest.append(("", null[1], null[2]))
    non_null = [entry for entry in nbest if entry[0]]
    best = non_null[0] if non_null else ("", 0.0, 0.0)
    best_text[example.qid] = best[0]
    if metadata.version_2:
      null_score_diff[example.qid] = float(null[1] + null[2] - best[1] - best[2])
    nbest = nbest or [("", 0.0, 0.0)]
    probabilities = _softmax([entry[1] + entry[2] for entry in nbest])
    all_nbest[example.qid] = [NbestEntry(text, float(p), float(sl), float(el))
                              for (text, sl, el), p in zip(nbest, probabilities)]
  return SquadPredictions(best_text, null_score_diff, all_nbest, metadata.version_2)


# ------------------------------------------------------------------------------------
# Scores.
# ------------------------------------------------------------------------------------
def score(logits, metadata: SquadMetadata, n_best_size: int = 20,
          max_answer_length: int = 30, null_score_diff_threshold: float = 0.0) -> dict:
  """Official SQuAD scores of {"start_logits", "end_logits"} [F, T] (module docstring)."""
  predictions = postprocess(logits["start_logits"], logits["end_logits"], metadata,
                            n_best_size, max_answer_length)
  gold = {e.qid: [a.text for a in e.answers] for e in metadata.examples}
  if not metadata.version_2:
    return metrics.squad_v1_scores(gold, predictions.best_text)
  return metrics.squad_v2_scores(gold, predictions.best_text,
                                 na_probs=predictions.null_score_diff,
                                 na_prob_thresh=null_score_diff_threshold)
