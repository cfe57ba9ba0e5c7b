"""ERNIE's knowledge masking: span files (text/spans.py) through prepare, the corpus, the
example builders and the stream to the "entity" / "phrase" / "mixture" masking schemes,
and inspect's share of whole units masked."""
import json
import os

import numpy as np
import pytest

from bert_jax.pretrain import inspect, masking, pipeline
from bert_jax.text import prepare, spans
from bert_jax.text.corpus import CorpusError

ENTITIES = ["harry potter", "new york city", "the united nations", "barack obama", "paris"]
PHRASES = ["a very old house", "the long cold winter", "some fresh green apples", "the sea"]
FILLER = ["we saw", "they liked", "nobody knew", "everyone talked about"]


def _write_corpus(folder, documents=64, sentences=4, seed=0):
  """A plain file of sentences "E verb P ." with their entity and phrase spans beside it."""
  rng = np.random.default_rng(seed)
  text, annotations = [], []
  for _ in range(documents):
    for _ in range(sentences):
      entity, phrase = rng.choice(ENTITIES), rng.choice(PHRASES)
      filler = rng.choice(FILLER)
      words = [*filler.split(), *entity.split(), "and", *phrase.split(), "."]
      first = len(filler.split())
      after = first + len(entity.split()) + 1
      text.append(" ".join(words))
      annotations.append(spans.format_line([
          (first, first + len(entity.split()), "entity"),
          (after, after + len(phrase.split()), "phrase")]))
    text.append("")
    annotations.append("{}")
  path = os.path.join(folder, "tagged.txt")
  with open(path, "w") as f:
    f.write("\n".join(text) + "\n")
  with open(spans.span_path(path), "w") as f:
    f.write("\n".join(annotations) + "\n")
  return path


def _data_config(corpus, **changes):
  config = pipeline.default_data_config()
  config.update({**dict(train_files=(corpus,), spans=True, max_seq_length=48,
                        max_predictions_per_seq=12, batch_size=8,
                        example_builder="doc_sentences", masking="entity"), **changes})
  return config


def _statistics(data_config, tokenizer, batches=8):
  train, _ = pipeline.make_inputs(data_config, tokenizer, span_fields=True)
  special = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
  stats, _ = inspect.statistics(train, batches, special, tokenizer.mask_id,
                                masking.continuation_table_for(tokenizer))
  return stats


def test_prepare_shards_carry_their_own_span_files(tmp_path):
  def documents(path):  # (texts, span lines) of each document
    with open(path) as f, open(spans.span_path(path)) as g:
      return list(zip(f.read().split("\n\n")[:-1], g.read().split("\n{}\n")[:-1]))
  source = _write_corpus(str(tmp_path), documents=5, sentences=2)
  out = str(tmp_path / "out" / "corpus.txt")
  prepare.prepare([source], out, with_spans=True)
  whole = documents(out)
  assert len(whole) == 5
  for i in range(2):
    counts, = prepare.prepare([source], out, with_spans=True, num_shards=2, shard_index=i)
    assert counts.documents == (3, 2)[i]
    assert documents(str(tmp_path / "out" / f"corpus-0000{i}-of-00002.txt")) == whole[i::2]


def test_prepare_carries_spans_and_the_corpus_tags_every_piece(tmp_path, tokenizer):
  source = _write_corpus(str(tmp_path), documents=3, sentences=2)
  out = str(tmp_path / "out" / "corpus.txt")
  counts = prepare.prepare([source], out, with_spans=True)
  assert (counts[0].documents, counts[0].sentences) == (3, 6)
  with open(out) as f, open(spans.span_path(out)) as g:
    assert f.read().split("\n") == open(source).read().split("\n")[:-1] + [""]
    assert len(g.read().split("\n")) == len(open(out).read().split("\n"))
  from bert_jax.text.corpus import file_lines, tokenize_lines
  corpus = tokenize_lines(file_lines([out], with_spans=True), tokenizer)
  assert corpus.span_tags.shape == corpus.token_ids.shape
  first = corpus.document_sentences(0)[0]
  tags = corpus.span_tags[:len(first)]
  words = open(out).readline().split()
  pieces = [tokenizer.vocab[i] for i in first]
  entity = spans.kind_code(tags, "entity")
  phrase = spans.kind_code(tags, "phrase")
  # Every piece of the entity words is tagged, the first BEGIN and the rest INSIDE.
  entity_pieces = [p for p, code in zip(pieces, entity) if code]
  assert entity[entity > 0][0] == spans.BEGIN and (entity[entity > 0][1:] == spans.INSIDE).all()
  assert " ".join(entity_pieces).replace(" ##", "") in ENTITIES
  assert phrase[phrase > 0][0] == spans.BEGIN and (phrase[phrase > 0][1:] == spans.INSIDE).all()
  assert len(pieces) >= len(words)


@pytest.mark.slow
def test_masked_entities_are_whole_and_the_mask_rate_is_kept(tmp_path, tokenizer):
  corpus = _write_corpus(str(tmp_path))
  config = _data_config(corpus)
  entity = _statistics(config, tokenizer)
  assert entity["entity_split_fraction"] == 0.0  # a masked entity is masked whole
  assert entity["entity_whole_fraction"] > 0.05
  assert abs(entity["selected_fraction"] - 0.15) < 0.03
  config.masking = "phrase"
  phrase = _statistics(config, tokenizer)
  assert phrase["phrase_split_fraction"] == 0.0 and phrase["phrase_whole_fraction"] > 0.05
  assert abs(phrase["selected_fraction"] - 0.15) < 0.03
  config.masking = "token"
  token = _statistics(config, tokenizer)
  assert token["entity_split_fraction"] > 0.5 and token["phrase_split_fraction"] > 0.5
  # ERNIE's stages mixed: whole units in some rows, split ones in the token rows.
  config.masking, config.masking_mixture = "mixture", "token:1,phrase:1,entity:1"
  mixed = _statistics(config, tokenizer)
  assert 0.0 < mixed["entity_split_fraction"] < token["entity_split_fraction"]
  assert abs(mixed["selected_fraction"] - 0.15) < 0.03


def test_masking_budget_never_exceeded_by_whole_units(tmp_path, tokenizer):
  corpus = _write_corpus(str(tmp_path))
  config = _data_config(corpus, max_predictions_per_seq=3)
  train, _ = pipeline.make_inputs(config, tokenizer, span_fields=True)
  batch = next(train.epoch_batches(0))
  assert (batch["masked_lm_weights"].sum(1) <= 3).all()
  assert (batch["masked_lm_weights"].sum(1) >= 1).all()


def _error(tmp_path, text_lines, span_lines):
  path = tmp_path / "bad.txt"
  path.write_text("\n".join(text_lines) + "\n")
  (tmp_path / "bad.spans.jsonl").write_text("\n".join(span_lines) + "\n")
  with pytest.raises(spans.SpanFileError) as error:
    prepare.prepare([str(path)], str(tmp_path / "out.txt"), with_spans=True)
  assert "\n" not in str(error.value)
  return str(error.value)


@pytest.mark.parametrize("span_line, message", [
    ("{not json", "bad.spans.jsonl:2: not valid JSON"),
    ('{"spans": [[0, 9, "entity"]]}', "bad.spans.jsonl:2: span [0, 9, 'entity'] is not within "
                                      "the line's 3 words"),
    ('{"spans": [[0, 1, "person"]]}', "bad.spans.jsonl:2: span [0, 1, 'person'] has kind "
                                      "'person', not one of"),
    ('{"spans": [[0, 2, "entity"], [1, 3, "entity"]]}', "bad.spans.jsonl:2: entity spans "
                                                        "overlap at word 1"),
    ('{"spans": [[0, "a", "entity"]]}', "bad.spans.jsonl:2: span [0, 'a', 'entity'] is not "
                                        "[start, end, kind]"),
    ('[1, 2]', "bad.spans.jsonl:2: expected an object"),
    ("", "bad.spans.jsonl:2: empty line"),
])
def test_bad_span_lines_are_one_line_errors_naming_file_and_line(tmp_path, span_line, message):
  error = _error(tmp_path, ["one two three", "four five six", "", "seven eight"],
                 ["{}", span_line, "{}", "{}"])
  assert message in error and str(tmp_path) in error


def test_span_file_of_another_length_or_missing_is_an_error(tmp_path):
  assert "bad.spans.jsonl:2: the span file has 1 lines, its text file" in _error(
      tmp_path, ["one two", "three"], ["{}"])
  assert "bad.spans.jsonl:2: span [0, 1, 'phrase'] is not within the line's 0 words" in _error(
      tmp_path, ["one two", "", "three"], ["{}", '{"spans": [[0, 1, "phrase"]]}', "{}"])
  (tmp_path / "alone.txt").write_text("one two\n")
  with pytest.raises(spans.SpanFileError, match="alone.txt: no span file beside it"):
    prepare.prepare([str(tmp_path / "alone.txt")], str(tmp_path / "o.txt"), with_spans=True)


def test_knowledge_masking_needs_spans_and_a_valid_mixture(tmp_path, tokenizer):
  corpus = _write_corpus(str(tmp_path), documents=3)
  for changes, message in (
      (dict(spans=False), "masking='entity' masks annotated units: it needs "
                          "config.data.spans=True"),
      (dict(masking="mixture", masking_mixture=""), "masking='mixture' needs masking_mixture"),
      (dict(masking="mixture", masking_mixture="token:1,person:2"),
       "masking_mixture names 'person'"),
      (dict(masking="mixture", masking_mixture="token:x"), "'token:x' is not name:weight")):
    with pytest.raises(ValueError, match=message):
      pipeline.make_inputs(_data_config(corpus, **changes), tokenizer)
  config = _data_config(corpus, train_files=(), tfds_name="wiki")
  with pytest.raises(CorpusError, match="spans=True reads the span files beside"):
    pipeline.load_corpora(config, tokenizer)


@pytest.mark.slow
def test_ernie_config_pretrains_with_knowledge_masking_and_exports_to_hf(tmp_path):
  """configs/ernie.py (runlocal) on an annotated corpus: 3 steps through the trainer with
  ERNIE's mixed masking, finite losses; the workdir is an ernie model that HF's
  ErnieForPreTraining loads with nothing missing."""
  transformers = pytest.importorskip("transformers")
  from bert_jax.weights import checkpoint
  from bert_jax.run import trainer
  from bert_jax.commands.convert import convert
  from configs import ernie
  from tests.helpers.runs import TINY_PRETRAINING, set_fields
  corpus = _write_corpus(str(tmp_path))
  config = set_fields(ernie.get_config(f"corpus={corpus},runlocal=True"),
                      {**TINY_PRETRAINING, "num_train_steps": 3, "eval_every_steps": 0,
                       "data.eval_held_out_docs": 0, "checkpoint_every_steps": 3,
                       "attention_guidance.weight": 0.0})
  workdir = str(tmp_path / "run")
  trainer.train_and_evaluate(config, workdir)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
  assert len(losses) == 3 and np.isfinite(losses).all(), losses
  assert checkpoint.read_model_config(workdir).family == "ernie"
  convert(workdir, str(tmp_path / "hf"), to="hf")
  _, info = transformers.ErnieForPreTraining.from_pretrained(str(tmp_path / "hf"),
                                                             output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info


def test_entity_and_phrase_selectors_take_annotated_units_whole():
  """masking.py alone: rows [CLS] w w E E E w P P P P w [SEP] with their span tags; over
  many draws every entity (phrase) is predicted whole or not at all, the budget is never
  exceeded, and each unit is drawn about as often as a single word."""
  import tensorflow as tf
  cls, sep, pad, mask = 101, 102, 0, 103
  row = [cls, *range(2000, 2011), sep] + [pad] * 3
  code = [0, 0, 0, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]  # entity words 3..5
  phrase = [0] * 7 + [1, 2, 2, 2] + [0] * 5  # phrase words 7..10
  tags = np.array(code) * spans.SPAN_KINDS["entity"] + np.array(phrase) * spans.SPAN_KINDS["phrase"]
  ids, tags = np.tile(row, (400, 1)).astype(np.int32), np.tile(tags, (400, 1)).astype(np.int32)
  for kind, unit in (("entity", slice(3, 6)), ("phrase", slice(7, 11))):
    options = masking.MaskingOptions(
        max_predictions_per_seq=6, mask_id=mask, special_ids=(pad, cls, sep, mask),
        replacement_ids=np.arange(1000, 1100, dtype=np.int32), masked_lm_prob=0.4,
        selector=kind, span_tags=True)
    noise = masking.example_noise(0, 0, tf.range(400, dtype=tf.int64),
                                  masking.noise_size(ids.shape[1], options))
    out = masking.mask_batch(tf.constant(ids), noise, options, tf.constant(tags))
    predicted = np.zeros(ids.shape, bool)
    weights = out["masked_lm_weights"].numpy() > 0
    rows, slots = np.nonzero(weights)
    predicted[rows, out["masked_lm_positions"].numpy()[rows, slots]] = True
    hits = predicted[:, unit].sum(1)
    assert set(hits.tolist()) <= {0, unit.stop - unit.start}, kind  # whole or nothing
    assert (weights.sum(1) <= 4).all()  # round(0.4 * 11 eligible) = 4
    assert 0.1 < (hits > 0).mean() < 0.6, (kind, (hits > 0).mean())
  with pytest.raises(ValueError, match="masking='entity' masks annotated units"):
    masking.MaskingOptions(max_predictions_per_seq=6, mask_id=mask, special_ids=(pad,),
                           replacement_ids=np.arange(3, dtype=np.int32), selector="entity")
