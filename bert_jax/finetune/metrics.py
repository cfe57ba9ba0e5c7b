"""Fine-tuning metrics, computed the way the official scorers compute them.

Pure numpy/Python, no framework imports. Every function takes plain predictions (class
ids, scores, tag strings, answer strings), never logits; the task readers in
bert_jax/data turn model outputs into those and call these.

  GLUE       accuracy, f1 (binary, positive class 1), macro_f1, matthews_corrcoef,
             pearson, spearman; `glue_metrics(names, predictions, labels)` looks them up
             in GLUE_METRICS (sklearn/scipy semantics, including their 0/NaN corner cases).
  Multi-label  `micro_f1(predicted, actual)` over [N, C] 0/1 rows (sklearn's
             average="micro").
  CoNLL      `entity_scores(true_tags, pred_tags)`: seqeval's default (non-strict) mode
             (conlleval's chunking): chunks (type, start, end) from IOB(ES) tags, micro
             P/R/F1 over sets of chunks (NER, syntactic chunks);
             `tag_accuracy(true_tags, pred_tags)`: the share of right tags (POS).
  SQuAD      `normalize_answer`, `exact_match`, `token_f1`, and the official
             `squad_v1_scores` (evaluate-v1.1.py) and `squad_v2_scores` (evaluate-v2.0.py,
             with the HasAns/NoAns breakdown and the best no-answer thresholds).
"""
import collections
from collections.abc import Callable, Mapping, Sequence
import re
import string

import numpy as np


# ------------------------------------------------------------------------------------
# GLUE: classification and regression.
# ------------------------------------------------------------------------------------
def _as_pair(predictions, labels) -> tuple[np.ndarray, np.ndarray]:
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  if predictions.shape != labels.shape or predictions.ndim != 1:
    raise ValueError(f"Expected predictions and labels of the same shape [N], got "
                     f"{predictions.shape} and {labels.shape}.")
  if predictions.size == 0:
    raise ValueError("No predictions to score.")
  return predictions, labels


def accuracy(predictions, labels) -> float:
  predictions, labels = _as_pair(predictions, labels)
  return float(np.mean(predictions == labels))


def f1(predictions, labels, positive: int = 1) -> float:
  """Binary F1 of class `positive` (sklearn's f1_score; 0.0 when undefined)."""
  predictions, labels = _as_pair(predictions, labels)
  predicted, actual = predictions == positive, labels == positive
  true_positives = np.sum(predicted & actual)
  denominator = np.sum(predicted) + np.sum(actual)
  return float(2 * true_positives / denominator) if denominator else 0.0


def macro_f1(predictions, labels) -> float:
  """The unweighted mean of each class's F1 over the classes in labels or predictions
  (sklearn's f1_score(average="macro"): a class never predicted scores 0)."""
  predictions, labels = _as_pair(predictions, labels)
  classes = np.union1d(labels, predictions)
  return float(np.mean([f1(predictions, labels, positive=c) for c in classes]))


def micro_f1(predicted, actual) -> float:
  """F1 of every (example, class) decision pooled: predicted, actual [N, C] of 0/1
  (sklearn's multi-label f1_score(average="micro"); 0.0 when both are empty)."""
  predicted, actual = np.asarray(predicted, bool), np.asarray(actual, bool)
  if predicted.shape != actual.shape or predicted.ndim != 2 or not predicted.size:
    raise ValueError(f"Expected predicted and actual rows of the same shape [N, C], got "
                     f"{predicted.shape} and {actual.shape}.")
  denominator = predicted.sum() + actual.sum()
  return float(2 * np.sum(predicted & actual) / denominator) if denominator else 0.0


def matthews_corrcoef(predictions, labels) -> float:
  """Matthews correlation (multi-class form, as sklearn); 0.0 when undefined."""
  predictions, labels = _as_pair(predictions, labels)
  classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  true_codes, pred_codes = codes[:labels.size], codes[labels.size:]
  confusion = np.zeros((classes.size, classes.size), np.float64)
  np.add.at(confusion, (true_codes, pred_codes), 1)
  true_totals, pred_totals = confusion.sum(1), confusion.sum(0)
  n = confusion.sum()
  cov_true_pred = np.trace(confusion) * n - true_totals @ pred_totals
  cov_pred = n * n - pred_totals @ pred_totals
  cov_true = n * n - true_totals @ true_totals
  if cov_pred * cov_true == 0:
    return 0.0
  return float(cov_true_pred / np.sqrt(cov_true * cov_pred))


def pearson(predictions, labels) -> float:
  """Pearson's r (NaN when either side is constant, as scipy)."""
  x, y = (np.asarray(a, np.float64) for a in _as_pair(predictions, labels))
  x, y = x - x.mean(), y - y.mean()
  denominator = np.sqrt((x @ x) * (y @ y))
  return float(x @ y / denominator) if denominator else float("nan")


def average_ranks(values) -> np.ndarray:
  """1-based ranks; tied values share the mean of their ranks (scipy 'average')."""
  values = np.asarray(values)
  order = np.argsort(values, kind="stable")
  sorted_values = values[order]
  is_new = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
  group = np.cumsum(is_new) - 1
  group_starts = np.flatnonzero(is_new)
  group_ends = np.append(group_starts[1:], values.size)  # exclusive
  mean_rank = (group_starts + 1 + group_ends) / 2.0
  ranks = np.empty(values.size, np.float64)
  ranks[order] = mean_rank[group]
  return ranks


def spearman(predictions, labels) -> float:
  """Spearman's rho: Pearson's r of the average ranks."""
  predictions, labels = _as_pair(predictions, labels)
  return pearson(average_ranks(predictions), average_ranks(labels))


GLUE_METRICS: Mapping[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "macro_f1": macro_f1,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def glue_metrics(names: Sequence[str], predictions, labels) -> dict[str, float]:
  """{name: GLUE_METRICS[name](predictions, labels)} for each name."""
  unknown = [name for name in names if name not in GLUE_METRICS]
  if unknown:
    raise ValueError(f"Unknown metric(s) {unknown}; known: {sorted(GLUE_METRICS)}.")
  return {name: GLUE_METRICS[name](predictions, labels) for name in names}


# ------------------------------------------------------------------------------------
# CoNLL: seqeval-style entity F1.
# ------------------------------------------------------------------------------------
# seqeval's default mode, written as data. A tag is split into its first character
# (the prefix: B I E S O, or anything else) and its type (after the first '-').
_ENDS_AFTER = frozenset("ES")  # A chunk always ends after an E or S tag.
_ENDING_PAIRS = frozenset({("B", "B"), ("B", "S"), ("B", "O"),
                           ("I", "B"), ("I", "S"), ("I", "O")})
_STARTS_AT = frozenset("BS")  # A chunk always starts at a B or S tag.
_STARTING_PAIRS = frozenset({("E", "E"), ("E", "I"), ("S", "E"), ("S", "I"),
                             ("O", "E"), ("O", "I")})
_NOT_CHUNK = frozenset("O.")  # Prefixes that neither start nor continue a chunk.


def _prefix_and_type(tag: str) -> tuple[str, str]:
  return tag[0], tag[1:].split("-", 1)[-1] or "_"


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
  """Chunks (type, first, last) of one tag sequence, as seqeval's get_entities.

  Non-strict: an I- tag after O (or after another type) opens a new chunk, and a type
  change closes the open one.
  """
  chunks = []
  prev_prefix, prev_type, begin = "O", "", 0
  for position, tag in enumerate([*tags, "O"]):
    prefix, type_ = _prefix_and_type(tag)
    type_changed = prev_type != type_
    if (prev_prefix in _ENDS_AFTER or (prev_prefix, prefix) in _ENDING_PAIRS
        or (prev_prefix not in _NOT_CHUNK and type_changed)):
      chunks.append((prev_type, begin, position - 1))
    if (prefix in _STARTS_AT or (prev_prefix, prefix) in _STARTING_PAIRS
        or (prefix not in _NOT_CHUNK and type_changed)):
      begin = position
    prev_prefix, prev_type = prefix, type_
  return chunks


def _prf(correct: int, predicted: int, actual: int) -> dict[str, float]:
  precision = correct / predicted if predicted else 0.0
  recall = correct / actual if actual else 0.0
  f_score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"precision": precision, "recall": recall, "f1": f_score}


def entity_scores(true_tags: Sequence[Sequence[str]],
                  pred_tags: Sequence[Sequence[str]]) -> dict:
  """Micro precision/recall/F1 over entity chunks, plus a per-type breakdown.

  Args:
    true_tags, pred_tags: one tag sequence per sentence; sentence lengths must match.
  Returns:
    {"precision", "recall", "f1", "per_type": {type: {precision, recall, f1,
    support}}}, equal to seqeval's precision_score/recall_score/f1_score and
    classification_report in default mode.
  """
  if len(true_tags) != len(pred_tags):
    raise ValueError(f"Got {len(true_tags)} true and {len(pred_tags)} predicted "
                     "sentences.")
  true_chunks, pred_chunks = collections.defaultdict(set), collections.defaultdict(set)
  for index, (true_seq, pred_seq) in enumerate(zip(true_tags, pred_tags)):
    if len(true_seq) != len(pred_seq):
      raise ValueError(f"Sentence {index} has {len(true_seq)} true and "
                       f"{len(pred_seq)} predicted tags.")
    for chunks, seq in ((true_chunks, true_seq), (pred_chunks, pred_seq)):
      for type_, first, last in get_entities(list(seq)):
        chunks[type_].add((index, first, last))
  per_type, totals = {}, np.zeros(3, np.int64)
  for type_ in sorted(set(true_chunks) | set(pred_chunks)):
    counts = np.array([len(true_chunks[type_] & pred_chunks[type_]),
                       len(pred_chunks[type_]), len(true_chunks[type_])])
    per_type[type_] = {**_prf(*counts), "support": int(counts[2])}
    totals += counts
  return {**_prf(*(int(c) for c in totals)), "per_type": per_type}


def tag_accuracy(true_tags: Sequence[Sequence[str]],
                 pred_tags: Sequence[Sequence[str]]) -> dict:
  """{"accuracy": the share of all words whose tag is right} (POS tagging's score);
  sentence lengths must match."""
  if len(true_tags) != len(pred_tags):
    raise ValueError(f"Got {len(true_tags)} true and {len(pred_tags)} predicted "
                     "sentences.")
  correct = total = 0
  for index, (true_seq, pred_seq) in enumerate(zip(true_tags, pred_tags)):
    if len(true_seq) != len(pred_seq):
      raise ValueError(f"Sentence {index} has {len(true_seq)} true and "
                       f"{len(pred_seq)} predicted tags.")
    correct += sum(t == p for t, p in zip(true_seq, pred_seq))
    total += len(true_seq)
  if not total:
    raise ValueError("No tags to score.")
  return {"accuracy": correct / total}


# ------------------------------------------------------------------------------------
# SQuAD.
# ------------------------------------------------------------------------------------
_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
  """Lowercase, drop ASCII punctuation, drop the articles a/an/the, squeeze spaces."""
  text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
  return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str, empty_agrees: bool = True) -> float:
  """Bag-of-tokens F1 of the normalised answers.

  empty_agrees: v2.0 semantics: if either side normalises to no tokens, the score is
    1.0 when both do and 0.0 otherwise. v1.1 (False) scores an empty side as 0.0.
  """
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(gold).split()
  if empty_agrees and (not pred_tokens or not gold_tokens):
    return float(pred_tokens == gold_tokens)
  common = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens))
               .values())
  if common == 0:
    return 0.0
  precision, recall = common / len(pred_tokens), common / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def squad_v1_scores(gold: Mapping[str, Sequence[str]],
                    predictions: Mapping[str, str]) -> dict[str, float]:
  """evaluate-v1.1.py: {"exact_match", "f1"} in percent, max over gold answers.

  Args:
    gold: question id -> gold answer texts (all of them, as in the dataset).
    predictions: question id -> predicted text. A missing question scores 0 (and is
      counted in "missing"), as in the official script.
  """
  if not gold:
    raise ValueError("No gold questions to score.")
  exact = f1_sum = 0.0
  for qid, answers in gold.items():
    if qid not in predictions:
      continue
    exact += max(exact_match(predictions[qid], a) for a in answers)
    f1_sum += max(token_f1(predictions[qid], a, empty_agrees=False) for a in answers)
  return {"exact_match": 100.0 * exact / len(gold), "f1": 100.0 * f1_sum / len(gold),
          "total": len(gold), "missing": sum(qid not in predictions for qid in gold)}


def _v2_raw_scores(gold, predictions) -> tuple[dict, dict]:
  exact, f1_scores = {}, {}
  for qid, answers in gold.items():
    answers = [a for a in answers if normalize_answer(a)] or [""]
    exact[qid] = max(exact_match(predictions[qid], a) for a in answers)
    f1_scores[qid] = max(token_f1(predictions[qid], a) for a in answers)
  return exact, f1_scores


def best_null_threshold(predictions: Mapping[str, str], raw_scores: Mapping[str, float],
                        na_probs: Mapping[str, float],
                        has_answer: Mapping[str, bool]) -> tuple[float, float]:
  """(best score in percent, threshold) of evaluate-v2.0.py's find_best_thresh.

  Sweeps the threshold over the sorted no-answer scores: answering nothing at all
  scores the no-answer questions, and each question whose no-answer score falls
  under the threshold swaps to its raw score (or loses a point for a no-answer
  question given a non-empty answer).
  """
  score = best = float(sum(not v for v in has_answer.values()))
  threshold = 0.0
  for qid in sorted(na_probs, key=lambda q: na_probs[q]):
    if qid not in raw_scores:
      continue
    if has_answer[qid]:
      score += raw_scores[qid]
    elif predictions[qid]:
      score -= 1
    if score > best:
      best, threshold = score, na_probs[qid]
  return 100.0 * best / len(raw_scores), threshold


def squad_v2_scores(gold: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
                    na_probs: Mapping[str, float] | None = None,
                    na_prob_thresh: float = 1.0) -> dict[str, float]:
  """evaluate-v2.0.py: exact/f1 overall and for HasAns/NoAns, plus best thresholds.

  Args:
    gold: question id -> gold answer texts; an empty list marks an unanswerable
      question.
    predictions: question id -> text ("" = no answer). Every gold question needs one.
    na_probs: question id -> no-answer score (BERT: null score minus best span score).
      A question whose score exceeds `na_prob_thresh` is answered with "". When given,
      the result also holds best_exact(_thresh) and best_f1(_thresh).
  """
  missing = [qid for qid in gold if qid not in predictions]
  if missing or not gold:
    raise ValueError(f"{len(missing)} of {len(gold)} questions have no prediction "
                     f"(first: {missing[:3]}).")
  has_answer = {qid: bool(answers) for qid, answers in gold.items()}
  raw_exact, raw_f1 = _v2_raw_scores(gold, predictions)
  probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}

  def thresholded(raw):
    return {qid: float(not has_answer[qid]) if probs[qid] > na_prob_thresh else s
            for qid, s in raw.items()}

  exact, f1_scores = thresholded(raw_exact), thresholded(raw_f1)
  result = {"exact": 100.0 * sum(exact.values()) / len(exact),
            "f1": 100.0 * sum(f1_scores.values()) / len(f1_scores), "total": len(exact)}
  for prefix, wanted in (("HasAns", True), ("NoAns", False)):
    qids = [qid for qid, has in has_answer.items() if has == wanted]
    if qids:
      result[f"{prefix}_exact"] = 100.0 * sum(exact[q] for q in qids) / len(qids)
      result[f"{prefix}_f1"] = 100.0 * sum(f1_scores[q] for q in qids) / len(qids)
      result[f"{prefix}_total"] = len(qids)
  if na_probs is not None:
    for name, raw in (("exact", raw_exact), ("f1", raw_f1)):
      best, threshold = best_null_threshold(predictions, raw, na_probs, has_answer)
      result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
  return result
