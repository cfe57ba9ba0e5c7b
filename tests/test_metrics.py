"""bert_jax.finetune.metrics against scikit-learn/scipy and hand-checked official-scorer cases."""
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk_metrics

from bert_jax.finetune import metrics


def _random_labels(rng, n, classes):
  return rng.integers(0, classes, n), rng.integers(0, classes, n)


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_match_sklearn(seed):
  rng = np.random.default_rng(seed)
  predictions, labels = _random_labels(rng, 200, 2)
  assert metrics.accuracy(predictions, labels) == pytest.approx(
      sk_metrics.accuracy_score(labels, predictions))
  assert metrics.f1(predictions, labels) == pytest.approx(
      sk_metrics.f1_score(labels, predictions))
  assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
      sk_metrics.matthews_corrcoef(labels, predictions))
  predictions, labels = _random_labels(rng, 200, 3)  # MCC, multi-class form.
  assert metrics.matthews_corrcoef(predictions, labels) == pytest.approx(
      sk_metrics.matthews_corrcoef(labels, predictions))


@pytest.mark.parametrize("seed", range(3))
def test_macro_and_micro_f1_match_sklearn(seed):
  rng = np.random.default_rng(seed)
  predictions, labels = _random_labels(rng, 60, 4)
  predictions[predictions == 3] = 2  # class 3 never predicted: its F1 is 0, still averaged
  assert metrics.macro_f1(predictions, labels) == pytest.approx(
      sk_metrics.f1_score(labels, predictions, average="macro", zero_division=0))
  predicted, actual = rng.random((50, 5)) > 0.6, rng.random((50, 5)) > 0.7
  assert metrics.micro_f1(predicted, actual) == pytest.approx(
      sk_metrics.f1_score(actual, predicted, average="micro"))
  assert metrics.micro_f1(np.zeros((3, 2)), np.zeros((3, 2))) == 0.0
  with pytest.raises(ValueError, match=r"\[N, C\]"):
    metrics.micro_f1([1, 0], [1, 0])


def test_classification_corner_cases_match_sklearn():
  all_zero, mixed = np.zeros(6, int), np.array([0, 1, 0, 1, 1, 0])
  # A constant prediction: MCC undefined -> 0; no positive anywhere: F1 -> 0.
  assert metrics.matthews_corrcoef(all_zero, mixed) == 0.0
  assert metrics.matthews_corrcoef(all_zero, mixed) == sk_metrics.matthews_corrcoef(
      mixed, all_zero)
  assert metrics.f1(all_zero, all_zero) == 0.0
  assert metrics.matthews_corrcoef(mixed, mixed) == pytest.approx(1.0)
  with pytest.raises(ValueError, match="same shape"):
    metrics.accuracy([0, 1], [0])


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy_with_ties(seed):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 26, 300) / 5.0  # STS-B-like scores with many ties.
  predictions = np.round(labels + rng.normal(0, 1, 300), 1)
  assert metrics.pearson(predictions, labels) == pytest.approx(
      stats.pearsonr(predictions, labels)[0])
  assert metrics.spearman(predictions, labels) == pytest.approx(
      stats.spearmanr(predictions, labels)[0])
  np.testing.assert_allclose(metrics.average_ranks(labels), stats.rankdata(labels))


def test_glue_metrics_table():
  result = metrics.glue_metrics(("f1", "accuracy"), [1, 0, 1, 1], [1, 0, 0, 1])
  assert result == pytest.approx({"f1": 0.8, "accuracy": 0.75})
  with pytest.raises(ValueError, match="Unknown metric"):
    metrics.glue_metrics(("auc",), [1], [1])


# ------------------------------------------------------------------------------------
# seqeval.
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("tags, entities", [
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 1), ("LOC", 3, 3)]),
    # Non-strict: I- after O opens a chunk; a type change closes one.
    (["O", "I-PER", "I-PER", "B-PER"], [("PER", 1, 2), ("PER", 3, 3)]),
    (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 0), ("LOC", 1, 2)]),
    (["B-ORG", "B-ORG", "I-ORG", "O", "O"], [("ORG", 0, 0), ("ORG", 1, 2)]),
    (["I-MISC"], [("MISC", 0, 0)]),
    (["O", "O"], []),
    # IOBES tags as seqeval reads them.
    (["S-PER", "B-LOC", "E-LOC", "E-LOC"], [("PER", 0, 0), ("LOC", 1, 2),
                                            ("LOC", 3, 3)]),
])
def test_get_entities_like_seqeval(tags, entities):
  assert metrics.get_entities(tags) == entities


def test_entity_scores_on_seqevals_documented_example():
  true = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
  pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
  result = metrics.entity_scores(true, pred)
  assert (result["precision"], result["recall"], result["f1"]) == (0.5, 0.5, 0.5)
  assert result["per_type"]["MISC"]["f1"] == 0.0
  assert result["per_type"]["PER"]["f1"] == 1.0


def test_entity_scores_micro_and_per_type():
  true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "B-ORG"], ["I-ORG", "O"]]
  result = metrics.entity_scores(true, pred)
  # Correct: PER(0-1), ORG(0-0) of sentence 2 (I- after O opens it). Wrong: ORG(3).
  assert result["precision"] == pytest.approx(2 / 3)
  assert result["recall"] == pytest.approx(2 / 3)
  assert result["f1"] == pytest.approx(2 / 3)
  assert result["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                       "support": 1}
  assert result["per_type"]["ORG"]["precision"] == pytest.approx(0.5)
  # Entities never cross sentences.
  assert metrics.entity_scores([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])[
      "per_type"]["PER"]["support"] == 2
  with pytest.raises(ValueError, match="Sentence 0"):
    metrics.entity_scores([["O"]], [["O", "O"]])


def test_tag_accuracy_counts_words_over_all_sentences():
  true = [["NNP", "VBZ", "JJ"], ["DT"]]
  assert metrics.tag_accuracy(true, [["NNP", "VBD", "JJ"], ["NN"]]) == {"accuracy": 0.5}
  assert metrics.tag_accuracy(true, true) == {"accuracy": 1.0}
  with pytest.raises(ValueError, match="Sentence 1 has 1 true and 2"):
    metrics.tag_accuracy(true, [["NNP", "VBZ", "JJ"], ["DT", "NN"]])
  with pytest.raises(ValueError, match="No tags"):
    metrics.tag_accuracy([[]], [[]])


# ------------------------------------------------------------------------------------
# SQuAD.
# ------------------------------------------------------------------------------------
def test_normalize_answer_like_official():
  assert metrics.normalize_answer(
      "The  Eiffel-Tower, in  Paris!") == "eiffeltower in paris"
  assert metrics.normalize_answer("an apple a day") == "apple day"
  assert metrics.normalize_answer("Theory") == "theory"  # Articles only as words.
  # Only ASCII punctuation is removed.
  assert metrics.normalize_answer("“quoted”") == "“quoted”"


def test_squad_v1_scores():
  gold = {"q1": ["Denver Broncos", "The Denver Broncos"], "q2": ["1858"],
          "q3": ["Saint Bernadette Soubirous"]}
  predictions = {"q1": "denver broncos!", "q2": "in 1858 maybe",
                 "q3": ""}
  result = metrics.squad_v1_scores(gold, predictions)
  assert result["exact_match"] == pytest.approx(100 / 3)
  f1_q2 = 2 * (1 / 3) * 1 / (1 / 3 + 1)
  assert result["f1"] == pytest.approx(100 * (1 + f1_q2 + 0) / 3)
  missing = metrics.squad_v1_scores(gold, {"q1": "Denver Broncos"})
  assert missing["exact_match"] == pytest.approx(100 / 3)
  assert missing["missing"] == 2
  # v1.1 scores an empty prediction against an empty gold as 0, v2.0 as 1.
  assert metrics.token_f1("", "", empty_agrees=False) == 0.0
  assert metrics.token_f1("", "") == 1.0


def test_squad_v2_scores_breakdown_and_best_threshold():
  gold = {"a1": ["Paris"], "a2": ["blue sky"], "n1": [], "n2": []}
  predictions = {"a1": "Paris", "a2": "sky", "n1": "London", "n2": "x"}
  na_probs = {"a1": -3.0, "a2": 0.5, "n1": 2.0, "n2": -1.0}
  result = metrics.squad_v2_scores(gold, predictions, na_probs, na_prob_thresh=0.0)
  # Answered: a1 (na -3), n2 (na -1, wrong); nulled: a2 (na 0.5, wrong), n1 (right).
  assert result["exact"] == pytest.approx(50.0)
  assert result["HasAns_exact"] == pytest.approx(50.0)
  assert result["NoAns_exact"] == pytest.approx(50.0)
  assert result["HasAns_total"] == result["NoAns_total"] == 2
  assert result["f1"] == pytest.approx(50.0)
  # Sweep in na order a1(-3) n2(-1) a2(0.5) n1(2): 2 -> 3 -> 2 -> 2+2/3 -> 1+2/3.
  assert result["best_exact"] == pytest.approx(75.0)
  assert result["best_exact_thresh"] == -3.0
  assert result["best_f1"] == pytest.approx(75.0)
  assert result["best_f1_thresh"] == -3.0
  no_probs = metrics.squad_v2_scores(gold, predictions)
  assert "best_f1" not in no_probs and no_probs["NoAns_exact"] == 0.0
  with pytest.raises(ValueError, match="no prediction"):
    metrics.squad_v2_scores(gold, {"a1": "Paris"})
