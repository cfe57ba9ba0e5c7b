"""Packed pretraining rows (config.data.packing with the sentence-block builders): every
token in one whole-sentence block, rows fuller than RoBERTa's one block per row, and the
trainer's MLM loss on a packed batch equal to the same examples unpacked (1e-5)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax import trainer
from bert_jax.pretrain import pipeline
from bert_jax.pretrain import sentence_blocks
from bert_jax.text.wordpiece import WordPieceTokenizer
from tests.conftest import tiny_pretraining_config
from tests.test_nsp_pairs import synthetic_corpus

CLS, SEP, PAD = -2, -1, -3  # the synthetic corpus's token i has id i >= 0


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


def _unpack(batch):
  """Every example of a packed batch in its own row, masked positions moved with it."""
  out = {k: [] for k in ("input_ids", "token_type_ids", "attention_mask",
                         "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")}
  t, p = batch["input_ids"].shape[1], batch["masked_lm_positions"].shape[1]
  for row, segments in enumerate(batch["segment_ids"]):
    for slot in range(1, segments.max() + 1):
      span = np.flatnonzero(segments == slot)
      ids = np.zeros(t, np.int32)
      ids[:len(span)] = batch["input_ids"][row, span]
      real = batch["masked_lm_weights"][row] > 0
      mine = real & np.isin(batch["masked_lm_positions"][row], span)
      slots = {"masked_lm_positions": batch["masked_lm_positions"][row][mine] - span[0],
               "masked_lm_ids": batch["masked_lm_ids"][row][mine],
               "masked_lm_weights": batch["masked_lm_weights"][row][mine]}
      for key, values in slots.items():
        out[key].append(np.pad(values, (0, p - len(values))))
      out["input_ids"].append(ids)
      out["token_type_ids"].append(np.zeros(t, np.int32))
      out["attention_mask"].append((np.arange(t) < len(span)).astype(np.int32))
  return {k: np.stack(v) for k, v in out.items()}


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
  model_config = trainer.resolve_model_config(config)
  task = trainer.make_task(config, model_config)
  model = task.build_model()
  params = model.init(jax.random.key(0), *(jnp.asarray(unpacked[k][:2]) for k in (
      "input_ids", "token_type_ids", "attention_mask", "masked_lm_positions")))["params"]

  def loss(rows):
    rows = {k: jnp.asarray(v) for k, v in rows.items()}
    forward = task.forward(model, params, rows, deterministic=True)
    sums, denominators = task.loss_sums(forward, rows), task.denominators(rows)
    return float(task.loss(sums, denominators)), forward.outputs.mlm_logits

  ours, logits = loss(batch)
  ref, ref_logits = loss(unpacked)
  np.testing.assert_allclose(ours, ref, rtol=1e-5)
  real, ref_real = batch["masked_lm_weights"] > 0, unpacked["masked_lm_weights"] > 0
  np.testing.assert_allclose(np.asarray(logits)[real], np.asarray(ref_logits)[ref_real],
                             atol=1e-5)


def test_pair_builders_and_attention_guidance_refuse_packing(corpus, vocab_path):
  config = tiny_pretraining_config(corpus, **{"data.packing": True})
  with pytest.raises(ValueError, match=r"config.data.packing=True: example_builder='nsp_pairs'"):
    pipeline.make_inputs(config.data, WordPieceTokenizer(vocab_path))
  assert config.attention_guidance.weight > 0  # tiny.py guides layer 0
  with pytest.raises(ValueError, match=r"packing=True: attention guidance's patterns"):
    trainer.make_task(config, trainer.resolve_model_config(config))
