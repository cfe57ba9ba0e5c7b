"""Packed pretraining rows (config.data.packing): with the sentence-block builders every
token in one whole-sentence block, rows fuller than RoBERTa's one block per row; with the
pair builders (NSP, SOP) every pair once, [CLS] A [SEP] B [SEP] in its own slot; and the
trainer's MLM and NSP/SOP losses and accuracies on a packed batch equal to the same
examples unpacked (1e-5)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.run import tasks
from bert_jax.run import trainer
from bert_jax.pretrain import builders
from bert_jax.pretrain import inspect as inspect_lib
from bert_jax.pretrain import pipeline
from bert_jax.pretrain import sentence_blocks
from bert_jax.text.corpus import TokenizedCorpus
from bert_jax.text.wordpiece import WordPieceTokenizer
from tests.helpers.runs import tiny_pretraining_config
from tests.helpers.corpora import synthetic_corpus

CLS, SEP, PAD = -2, -1, -3  # the synthetic corpus's token i has id i >= 0


def _pair_input(config, tokenizer):
  """The stream over a synthetic corpus of short sentences (many short pairs to pack),
  token i as id 1000 + i (clear of the vocab's special ids)."""
  plain = synthetic_corpus(np.random.default_rng(5).integers(2, 8, size=300), max_len=10)
  corpus = TokenizedCorpus(plain.token_ids + 1000, plain.sentence_starts,
                           plain.document_starts, sources=("synthetic",))
  return pipeline.PretrainingInput({0: corpus}, tokenizer, config.data)


@pytest.mark.parametrize("cross", [True, False])
def test_packed_blocks_are_whole_sentences_every_token_once(cross):
  corpus = synthetic_corpus(np.random.default_rng(3).integers(1, 30, size=80), max_len=40)
  plain = sentence_blocks.pack_sentence_blocks(corpus, 30, cross)
  blocks = sentence_blocks.pack_sentence_blocks(corpus, 30, cross, fill_gaps=True)
  laid_out = sentence_blocks.block_rows(blocks, corpus, 32, CLS, SEP, PAD)
  ids, lengths, segments = (laid_out[k] for k in ("input_ids", "lengths", "segment_ids"))
  assert len(ids) == len(blocks) < len(plain) and (lengths <= 32).all()
  assert len(blocks.starts) > len(blocks)  # some rows hold several blocks
  # Every token once: the blocks, in corpus order, concatenate to the corpus.
  order = np.argsort(blocks.starts)
  tokens = np.concatenate([corpus.token_ids[s:s + n] for s, n in
                           zip(blocks.starts[order], blocks.lengths[order])])
  np.testing.assert_array_equal(tokens, corpus.token_ids)
  starts = set(corpus.sentence_starts.tolist())
  whole = blocks.lengths < 30  # a block cut from an over-long sentence may end inside it
  cut = set((blocks.starts[~whole] + 30).tolist())  # ... and its rest starts there
  assert all(s in starts | cut for s in blocks.starts[whole].tolist())
  assert all(s in starts for s in (blocks.starts + blocks.lengths)[whole].tolist())
  # Each example: [CLS] tokens [SEP], its own segment id, positions from 0.
  for row in range(len(ids)):
    for slot in range(1, segments[row].max() + 1):
      span = np.flatnonzero(segments[row] == slot)
      assert ids[row, span[0]] == CLS and ids[row, span[-1]] == SEP
      np.testing.assert_array_equal(laid_out["positions"][row, span], np.arange(len(span)))
  assert (segments[ids == PAD] == 0).all() and (ids[segments == 0] == PAD).all()
  assert lengths.sum() == (blocks.lengths + blocks.separators + 2).sum()
  plain_lengths = sentence_blocks.block_rows(plain, corpus, 32, CLS, SEP, PAD)["lengths"]
  assert lengths.sum() / lengths.size / 32 > plain_lengths.sum() / plain_lengths.size / 32
  # take() picks rows (a builder's instances), with all their blocks.
  picked = blocks.take(np.array([2, 0]))
  assert len(picked) == 2
  np.testing.assert_array_equal(picked.starts, np.concatenate(
      [blocks.starts[blocks.rows == 2], blocks.starts[blocks.rows == 0]]))


def _unpack(batch, label_field=None):
  """Every example of a packed batch in its own row, masked positions (and, for pairs,
  token types and the slot's label) moved with it."""
  keys = ("input_ids", "token_type_ids", "attention_mask", "masked_lm_positions",
          "masked_lm_ids", "masked_lm_weights") + ((label_field,) if label_field else ())
  out = {k: [] for k in keys}
  t, p = batch["input_ids"].shape[1], batch["masked_lm_positions"].shape[1]
  for row, segments in enumerate(batch["segment_ids"]):
    for slot in range(1, segments.max() + 1):
      span = np.flatnonzero(segments == slot)
      ids, types = np.zeros(t, np.int32), np.zeros(t, np.int32)
      ids[:len(span)] = batch["input_ids"][row, span]
      types[:len(span)] = batch["token_type_ids"][row, span]
      real = batch["masked_lm_weights"][row] > 0
      mine = real & np.isin(batch["masked_lm_positions"][row], span)
      slots = {"masked_lm_positions": batch["masked_lm_positions"][row][mine] - span[0],
               "masked_lm_ids": batch["masked_lm_ids"][row][mine],
               "masked_lm_weights": batch["masked_lm_weights"][row][mine]}
      for key, values in slots.items():
        out[key].append(np.pad(values, (0, p - len(values))))
      out["input_ids"].append(ids)
      out["token_type_ids"].append(types)
      out["attention_mask"].append((np.arange(t) < len(span)).astype(np.int32))
      if label_field:
        assert batch["example_mask"][row, slot - 1] == 1.0
        assert batch["cls_positions"][row, slot - 1] == span[0]
        out[label_field].append(batch[label_field][row, slot - 1])
  return {k: np.stack(v) for k, v in out.items()}


def _task_on(config, *batches):
  """(metrics, loss, model outputs) of PretrainingTask (forward, loss sums, denominators)
  on each batch, with one set of fresh params; jitted (op-by-op it is minutes here)."""
  task = tasks.make_task(config, trainer.resolve_model_config(config))
  model = task.build_model()
  first = batches[-1]
  params = jax.jit(model.init)(jax.random.key(0), *(jnp.asarray(first[k][:2]) for k in (
      "input_ids", "token_type_ids", "attention_mask", "masked_lm_positions")))["params"]

  @jax.jit
  def run(params, rows):
    forward = task.forward(model, params, rows, deterministic=True)
    sums, denominators = task.loss_sums(forward, rows), task.denominators(rows)
    return (task.metrics(sums, denominators), task.loss(sums, denominators),
            forward.outputs)

  results = []
  for batch in batches:
    metrics, loss, outputs = jax.device_get(run(params, {k: jnp.asarray(v)
                                                          for k, v in batch.items()}))
    results.append(({k: float(v) for k, v in metrics.items()}, float(loss), outputs))
  return results


def test_packed_mlm_loss_equals_unpacked(corpus, vocab_path):
  """The stream's packed rows through PretrainingTask (forward, loss sums, loss)."""
  config = tiny_pretraining_config(corpus, objectives="mlm", **{
      "data.example_builder": "full_sentences", "data.packing": True,
      "attention_guidance.weight": 0.0})
  train, _ = pipeline.make_inputs(config.data, WordPieceTokenizer(vocab_path))
  batch = next(train)
  assert {"segment_ids", "positions"} <= set(batch)
  assert batch["segment_ids"].max() >= 2  # some row holds several examples
  unpacked = _unpack(batch)
  assert len(unpacked["input_ids"]) > len(batch["input_ids"])
  assert unpacked["masked_lm_weights"].sum() == batch["masked_lm_weights"].sum() > 0
  (_, ours, outputs), (_, ref, ref_outputs) = _task_on(config, batch, unpacked)
  logits, ref_logits = outputs.mlm_logits, ref_outputs.mlm_logits
  np.testing.assert_allclose(ours, ref, rtol=1e-5)
  real, ref_real = batch["masked_lm_weights"] > 0, unpacked["masked_lm_weights"] > 0
  np.testing.assert_allclose(np.asarray(logits)[real], np.asarray(ref_logits)[ref_real],
                             atol=1e-5)


@pytest.mark.parametrize("name", ["nsp_pairs", "sop"])
def test_packed_pairs_each_in_its_slot_every_pair_once(name):
  corpus = synthetic_corpus(np.random.default_rng(4).integers(2, 12, size=60), max_len=12)
  data = pipeline.default_data_config()
  data.update({"example_builder": name, "max_seq_length": 40, "short_seq_prob": 0.6})
  builder = builders.get(name)
  special = builders.SpecialIds(pad=PAD, cls=CLS, sep=SEP)
  plain_options = builder.options(data)
  pairs = builder.instances(corpus, plain_options, np.random.default_rng(0))
  plain = builder.rows(pairs, corpus, plain_options, special)
  data.packing, data.pairs_per_row = True, 3
  options = builder.options(data)
  packed_pairs = builder.instances(corpus, options, np.random.default_rng(0))
  assert isinstance(packed_pairs, builders.PackedPairs)
  picked = packed_pairs.take(np.random.default_rng(1).permutation(len(packed_pairs)))
  rows = builder.rows(picked, corpus, options, special)
  label_field = builder.label_fields[0]
  mask, cls_positions = rows.labels["example_mask"], rows.packing["cls_positions"]
  assert mask.shape == cls_positions.shape == rows.labels[label_field].shape == (
      len(packed_pairs), 3)
  assert mask.sum() == len(pairs) > len(packed_pairs)  # every pair, fewer rows
  assert (mask.sum(-1) >= 2).any() and (mask == 0).any()  # shared rows and empty slots
  assert rows.lengths.sum() == plain.lengths.sum()
  assert rows.lengths.sum() / rows.input_ids.size > plain.lengths.sum() / plain.input_ids.size
  # Each slot is one unpacked row exactly: ids, token types 0/1, positions from 0, label.
  unpacked = {(tuple(plain.input_ids[i, :n]), tuple(plain.token_type_ids[i, :n]),
               int(plain.labels[label_field][i])) for i, n in enumerate(plain.lengths)}
  seen = []
  segments, positions = rows.packing["segment_ids"], rows.packing["positions"]
  for row, slot in zip(*np.nonzero(mask)):
    span = np.flatnonzero(segments[row] == slot + 1)
    assert span[0] == cls_positions[row, slot] and rows.input_ids[row, span[0]] == CLS
    np.testing.assert_array_equal(positions[row, span], np.arange(len(span)))
    seen.append((tuple(rows.input_ids[row, span]), tuple(rows.token_type_ids[row, span]),
                 int(rows.labels[label_field][row, slot])))
  assert len(seen) == len(set(seen)) and set(seen) == unpacked
  assert (rows.labels[label_field][mask == 0] == 0).all()
  assert (rows.input_ids[segments == 0] == PAD).all()


@pytest.mark.parametrize("objective,name", [("nsp", "nsp_pairs"), ("sop", "sop")])
def test_packed_pair_losses_equal_unpacked(tokenizer, objective, name):
  """The stream's packed pair rows through PretrainingTask: the loss and every metric
  (MLM and NSP/SOP loss and accuracy) of the packed batch equal the unpacked batch's."""
  config = tiny_pretraining_config("unused.txt", objectives=f"mlm,{objective}", **{
      "data.example_builder": name, "data.packing": True, "data.short_seq_prob": 0.5,
      "attention_guidance.weight": 0.0})
  batch = next(_pair_input(config, tokenizer))
  assert (batch["example_mask"].sum(-1) >= 2).any()  # some row holds several pairs
  label_field = builders.get(name).label_fields[0]
  assert batch["cls_positions"].shape == batch["example_mask"].shape == (
      batch[label_field].shape) == (len(batch["input_ids"]), config.data.pairs_per_row)
  assert (batch["example_mask"] == 0).any()  # some slots are empty
  unpacked = _unpack(batch, label_field)
  assert len(unpacked["input_ids"]) == batch["example_mask"].sum()
  assert unpacked["masked_lm_weights"].sum() == batch["masked_lm_weights"].sum() > 0
  assert 0 < unpacked[label_field].sum() < len(unpacked[label_field])  # both labels
  (ours, our_loss, outputs), (ref, ref_loss, ref_outputs) = _task_on(config, batch, unpacked)
  assert set(ours) == {"loss", "mlm_loss", "mlm_accuracy", "mlm_accuracy_corrupted",
                       f"{objective}_loss", f"{objective}_accuracy"}
  for key in ours:
    np.testing.assert_allclose(ours[key], ref[key], rtol=1e-5, atol=1e-6, err_msg=key)
  np.testing.assert_allclose(our_loss, ref_loss, rtol=1e-5)
  real = batch["example_mask"] > 0
  np.testing.assert_allclose(np.asarray(outputs.sentence_logits[objective])[real],
                             np.asarray(ref_outputs.sentence_logits[objective]), atol=1e-5)
  assert 0.0 < ours[f"{objective}_accuracy"] < 1.0  # not all slots, nor none, count


def test_inspect_reports_slots_and_fill(tokenizer):
  """inspect's slot count and fill on packed NSP rows, and both builders' packed fill."""
  config = tiny_pretraining_config("unused.txt", **{
      "data.packing": True, "data.pairs_per_row": 3, "data.short_seq_prob": 0.5})
  train = _pair_input(config, tokenizer)
  special_ids = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
  stats, batches = inspect_lib.statistics(train, 4, special_ids, tokenizer.mask_id,
                                          np.zeros(len(tokenizer.vocab), bool))
  pairs = sum(b["example_mask"].sum() for b in batches)
  rows = sum(len(b["input_ids"]) for b in batches)
  is_next = sum(((b["next_sentence_labels"] == 0) * b["example_mask"]).sum() for b in batches)
  assert stats["slots_per_row"] == 3.0
  assert stats["examples_per_row"] == pytest.approx(pairs / rows) and pairs > rows
  assert stats["slot_fill"] == pytest.approx(pairs / (3 * rows))
  assert stats["is_next_fraction"] == pytest.approx(is_next / pairs)
  assert stats["fill_rate"] == pytest.approx(
      sum(b["attention_mask"].sum() for b in batches) / sum(b["attention_mask"].size
                                                            for b in batches))
  fills = inspect_lib.builder_fill_rates(
      list(train.corpora.values()), config.data,
      builders.SpecialIds(pad=tokenizer.pad_id, cls=tokenizer.cls_id, sep=tokenizer.sep_id))
  for name in ("nsp_pairs", "sop"):
    assert fills[f"fill_{name}_packed"] > fills[f"fill_{name}"]
  rendered = inspect_lib.render_example(batches[0], int(np.argmax(
      batches[0]["example_mask"].sum(-1))), tokenizer)
  assert " + " in rendered.split(",")[0]  # one label per pair of the row


def test_packing_refusals(corpus, vocab_path):
  """Attention guidance and a pair row without slots refuse packing, in one line each."""
  config = tiny_pretraining_config(corpus, **{"data.packing": True})
  assert config.attention_guidance.weight > 0  # tiny.py guides layer 0
  with pytest.raises(ValueError, match=r"packing=True: attention guidance's patterns"):
    tasks.make_task(config, trainer.resolve_model_config(config))
  config.data.pairs_per_row = 0
  with pytest.raises(ValueError, match=r"config.data.pairs_per_row=0"):
    pipeline.make_inputs(config.data, WordPieceTokenizer(vocab_path))
