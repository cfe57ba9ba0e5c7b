"""SQuAD reader, doc-stride features, postprocessing round trips and bad input."""
import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from bert_jax.finetune import metrics
from bert_jax.finetune import squad_reader as squad
from bert_jax.finetune import squad_postprocess
from bert_jax.finetune.sources import DataFormatError
from bert_jax.text.tokenizer_json import TokenizerJson
from tests.helpers.tokenizer_samples import modernbert_like_tokenizer

V1_FILE = "squad/du2017_split/test-v1.1.json"
V2_FILE = "squad/v2.0_train_subset/train-v2.0.json"



@pytest.fixture(scope="module")
def v1_examples(data_dir):
  return squad.read_examples(V1_FILE, data_dir=data_dir)


@pytest.fixture(scope="module")
def v2_examples(data_dir):
  return squad.read_examples(V2_FILE, data_dir=data_dir)


def test_real_files(v1_examples, v2_examples):
  assert len(v1_examples) == 11877
  assert len({e.provenance.split(".qas")[0] for e in v1_examples}) == 2430
  assert len({e.title for e in v1_examples}) == 44
  assert len(v2_examples) == 4719
  assert sum(e.is_impossible for e in v2_examples) == 348
  assert all(not e.answers for e in v2_examples if e.is_impossible)


def _gold_logits(features):
  """+10 at the gold start/end of each window ([CLS] when not inside), -10 elsewhere."""
  shape, rows = features["input_ids"].shape, np.arange(len(features["input_ids"]))
  start, end = np.full(shape, -10.0), np.full(shape, -10.0)
  start[rows, features["start_positions"]] = 10.0
  end[rows, features["end_positions"]] = 10.0
  return {"start_logits": start, "end_logits": end}


def _representable(examples, tokenizer, max_answer_length=30):
  """Answers that are whole pieces of their context and short enough to be found."""
  contexts = squad.tokenize_contexts([e.context for e in examples], tokenizer)
  pieces = tokenizer.encode_words([e.answers[0].text for e in examples])
  kept = []
  for example, context, answer in zip(examples, contexts, pieces):
    start, end = squad.answer_piece_span(context, example.answers[0], answer)
    if context.pieces[start:end + 1] == answer and end - start < max_answer_length:
      kept.append(example)
  return kept


def test_gold_spans_give_em_100_on_v1(v1_examples, tokenizer):
  examples = _representable(v1_examples[:400], tokenizer)
  assert len(examples) >= 390  # The rest split a piece ("six" in "sixth") or are long.
  features, metadata = squad.featurize(examples, tokenizer, max_seq_length=192,
                                       doc_stride=64)
  assert len(features["input_ids"]) > len(examples)  # Long contexts got windows.
  assert not metadata.version_2
  result = squad_postprocess.score(_gold_logits(features), metadata)
  assert result == {"exact_match": 100.0, "f1": 100.0, "total": len(examples),
                    "missing": 0}
  predictions = squad_postprocess.postprocess(**_gold_logits(features), metadata=metadata)
  same = sum(predictions.best_text[e.qid] == e.answers[0].text for e in examples)
  assert same >= 0.98 * len(examples)  # Original casing and spacing, not normalised.


@pytest.fixture(scope="module")
def family_tokenizers(v1_examples, tmp_path_factory):
  """Byte-level BPE (RoBERTa's kind), SentencePiece (ALBERT's) and a tokenizer.json
  (ModernBERT's), each learned on contexts."""
  from bert_jax.text import bpe, sentencepiece_vocab
  folder = tmp_path_factory.mktemp("squad_vocabs")
  text = folder / "contexts.txt"
  text.write_text("".join(c + "\n" for c in sorted({e.context for e in v1_examples[2000:]})),
                  encoding="utf-8")
  model = sentencepiece_vocab.train_sentencepiece([str(text)], str(folder / "spiece"),
                                                  vocab_size=2000, num_threads=2)
  return {"bpe": bpe.train_bpe([str(text)], str(folder / "bpe"), vocab_size=2000),
          "sentencepiece": sentencepiece_vocab.SentencePieceTokenizer(model),
          "tokenizer_json": TokenizerJson(modernbert_like_tokenizer(
              str(text), str(folder / "tokenizer_json"), vocab_size=2000))}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bpe", "sentencepiece", "tokenizer_json"])
def test_gold_spans_give_em_100_with_the_family_tokenizers(v1_examples, family_tokenizers,
                                                          kind):
  # RoBERTa / ModernBERT (byte-level BPE) and ALBERT (SentencePiece) answer texts come back
  # from their own pieces, in the context's characters.
  tokenizer = family_tokenizers[kind]
  examples = _representable(v1_examples[:300], tokenizer)
  # The rest end inside a word's pieces ("1889" in "(1889)," is "Ġ(", "1889", "),"):
  # labelled with the whole word, as BERT's run_squad labels a piece it cannot narrow.
  assert len(examples) >= 0.9 * 300
  features, metadata = squad.featurize(examples, tokenizer, max_seq_length=192,
                                       doc_stride=64)
  result = squad_postprocess.score(_gold_logits(features), metadata)
  assert result == {"exact_match": 100.0, "f1": 100.0, "total": len(examples),
                    "missing": 0}
  predictions = squad_postprocess.postprocess(**_gold_logits(features), metadata=metadata)
  assert all(predictions.best_text[e.qid] == e.answers[0].text for e in examples)
  if kind != "sentencepiece":  # Words read as in running text: 'Ġword', not a text start.
    context = metadata.contexts[0]
    assert context.pieces[:len(tokenizer.encode([" " + context.words[0]])[0])] == (
        tokenizer.encode([" " + context.words[0]])[0])


def test_v2_null_answers_and_threshold(v2_examples, tokenizer):
  answerable = _representable([e for e in v2_examples if e.answers][:150], tokenizer)
  examples = answerable + [e for e in v2_examples if e.is_impossible][:50]
  features, metadata = squad.featurize(examples, tokenizer, max_seq_length=256)
  assert metadata.version_2
  impossible = np.array([examples[i].is_impossible for i in features["example_index"]])
  assert not features["start_positions"][impossible].any()
  result = squad_postprocess.score(_gold_logits(features), metadata)
  assert result["HasAns_exact"] == result["NoAns_exact"] == 100.0
  assert (result["HasAns_total"], result["NoAns_total"]) == (len(answerable), 50)
  assert result["best_f1"] == 100.0
  predictions = squad_postprocess.postprocess(**_gold_logits(features), metadata=metadata)
  # Answerable: null score -20 (the gold window) vs best span +20. Unanswerable: null
  # +20 vs a -20 span, or vs none (no top-20 start in the context): diff 20 - 0.
  diffs = predictions.null_score_diff
  assert all(diffs[e.qid] == -40.0 for e in answerable)
  assert all(diffs[e.qid] in (20.0, 40.0) for e in examples if e.is_impossible)
  never_null = squad_postprocess.score(_gold_logits(features), metadata,
                                       null_score_diff_threshold=100.0)
  # Now only questions without any candidate span answer "" (and spans like "The",
  # which normalise to "", still match the empty gold answer).
  assert never_null["NoAns_exact"] < 100.0 and never_null["HasAns_exact"] == 100.0
  assert all(bool(predictions.answers(100.0)[e.qid]) == (diffs[e.qid] == 40.0)
             for e in examples if e.is_impossible)
  assert never_null["best_exact"] == 100.0  # The sweep finds a better threshold.
  assert all(predictions.answers(0.0)[e.qid] == "" for e in examples if e.is_impossible)


def test_windows_and_max_context(tokenizer):
  assert squad.doc_windows(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
  assert squad.doc_windows(3, 4, 2) == [(0, 3)]
  best = squad.max_context_window([(0, 4), (2, 4), (4, 4), (6, 4)], 10)
  # Piece 2: min(2, 1) + .04 in window 0 vs min(0, 3) in 1 -> window 0.
  np.testing.assert_array_equal(best, [0, 0, 0, 1, 1, 2, 2, 3, 3, 3])
  context = "The  Eiffel\tTower (1889) stands."
  example = squad.SquadExample("q", "t", "When?", context,
                               (squad.Answer("1889", context.index("1889")),), False, "x")
  features, metadata = squad.featurize([example], tokenizer, max_seq_length=12,
                                       doc_stride=3)
  for f in range(len(features["input_ids"])):
    ids = features["input_ids"][f]
    s, e = features["start_positions"][f], features["end_positions"][f]
    if s:
      assert tokenizer.decode(ids[s:e + 1]) == "1889"
    on_context = metadata.token_to_word[f] >= 0
    assert (features["token_type_ids"][f][on_context] == 1).all()
  assert metadata.token_is_max_context.sum() == len(metadata.contexts[0].pieces)
  assert features["start_positions"].astype(bool).sum() >= 1


def test_project_to_original_keeps_the_context_characters():
  project = squad_postprocess.project_to_original
  assert project("1889", "( 1889 )", "(1889)") == "1889"
  assert project("beyonce", "beyonce knowles", "Beyoncé Knowles") == "Beyoncé"
  assert project("new york", "in new york city", "in New  York City") == "New  York"
  assert project("[UNK]", "abc", "abc") == "abc"  # Not found: the whole words.


def test_split_by_article(v1_examples):
  kept, heldout = squad.split_by_article(v1_examples, 0.1, seed=0)
  kept_titles, heldout_titles = {e.title for e in kept}, {e.title for e in heldout}
  assert len(heldout_titles) == 4 and not kept_titles & heldout_titles
  assert len(kept) + len(heldout) == len(v1_examples)
  again = squad.split_by_article(list(reversed(v1_examples)), 0.1, seed=0)[1]
  assert {e.title for e in again} == heldout_titles
  assert {e.title for e in squad.split_by_article(v1_examples, 0.1, seed=1)[1]} != (
      heldout_titles)


def test_load_split_heldout(data_dir, tokenizer):
  config = {"data_dir": data_dir, "sources": {"train": V1_FILE},
            "heldout_fraction": 0.03, "max_query_length": 32}
  features, metadata = squad.load_split(config, "heldout", tokenizer, 384)
  assert len({e.title for e in metadata.examples}) == 1
  assert len(features["input_ids"]) >= len(metadata.examples)


def _mock_squad(records):
  def as_dataset(self, split, **unused_kwargs):
    assert split == "validation"
    spec = self.info.features.get_tensor_spec()
    return tf.data.Dataset.from_generator(lambda: iter(records), output_signature=spec)
  return tfds.testing.mock_data(as_dataset_fn=as_dataset)


def test_tfds_squad_v1_and_v2():
  context = "Notre Dame is in Indiana."
  answers = {"text": ["Indiana"], "answer_start": [17]}
  record = {"id": "q1", "title": "ND", "context": context, "question": "Where?",
            "answers": answers}
  with _mock_squad([record]):
    (v1,) = squad.read_examples("tfds:squad/v1.1", "dev")
  assert v1.answers == (squad.Answer("Indiana", 17),) and not v1.is_impossible
  impossible = {**record, "id": "q2", "answers": {"text": [], "answer_start": []},
                "is_impossible": True,
                "plausible_answers": {"text": ["Indiana"], "answer_start": [17]}}
  with _mock_squad([{**record, "is_impossible": False,
                     "plausible_answers": {"text": [], "answer_start": []}},
                    impossible]):
    examples = squad.read_examples("tfds:squad/v2.0", "dev")
  assert [e.is_impossible for e in examples] == [False, True]


def _write_json(tmp_path, qas, name="bad.json", context="Paris is in France."):
  path = tmp_path / name
  path.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [
      {"context": context, "qas": qas}]}]}), encoding="utf-8")
  return str(path)


def test_bad_input(tmp_path):
  good = {"id": "ok", "question": "Where?", "answers": [{"text": "France",
                                                         "answer_start": 12}]}
  bad = {"id": "off", "question": "Where?", "answers": [{"text": "France",
                                                         "answer_start": 11}]}
  path = _write_json(tmp_path, [good, bad])
  with pytest.raises(DataFormatError, match=r"bad\.json: data\[0\]\.paragraphs\[0\]\."
                                            r"qas\[1\] \(id off\): answer 'France'"):
    squad.read_examples(path)
  assert [e.qid for e in squad.read_examples(path, skip_bad_answers=True)] == ["ok"]
  contradictory = {**good, "is_impossible": True}
  with pytest.raises(DataFormatError, match="is_impossible=True but"):
    squad.read_examples(_write_json(tmp_path, [contradictory], "v2.json"))
  no_id = {"question": "Where?", "answers": []}
  with pytest.raises(DataFormatError, match="missing or malformed"):
    squad.read_examples(_write_json(tmp_path, [no_id], "noid.json"))
  empty = tmp_path / "empty.json"
  empty.write_text("")
  with pytest.raises(DataFormatError, match=r"empty\.json:1: the file is empty"):
    squad.read_examples(str(empty))
  broken = tmp_path / "broken.json"
  broken.write_text('{"data": [\n  {"title": }]}')
  with pytest.raises(DataFormatError, match=r"broken\.json:2: invalid JSON"):
    squad.read_examples(str(broken))


def test_nbest_ranks_and_filters_spans(tokenizer):
  context = "Paris is the capital of France ."
  example = squad.SquadExample("q", "t", "What?", context,
                               (squad.Answer("France", 24),), False, "x")
  features, metadata = squad.featurize([example], tokenizer, max_seq_length=32)
  ids = list(features["input_ids"][0])
  paris, france = ids.index(tokenizer.encode(["paris"])[0][0]), ids.index(
      tokenizer.encode(["france"])[0][0])
  start, end = np.zeros((1, 32)), np.zeros((1, 32))
  start[0, france], end[0, paris] = 5.0, 6.0  # Best pair is end < start: invalid.
  start[0, paris], end[0, france] = 4.0, 3.0  # "Paris ... France": 6 pieces.
  predictions = squad_postprocess.postprocess(start, end, metadata, n_best_size=3,
                                              max_answer_length=30)
  nbest = predictions.nbest["q"]
  assert len(nbest) == 3 and predictions.best_text["q"] == nbest[0].text
  assert sum(entry.probability for entry in nbest) == pytest.approx(1.0)
  assert nbest[0].text == "Paris"  # start 4 (Paris) + end 6 (Paris) = 10.
  short = squad_postprocess.postprocess(start, end, metadata, max_answer_length=1)
  assert all(len(entry.text.split()) == 1 for entry in short.nbest["q"])
  assert metrics.exact_match(short.best_text["q"], "Paris")
