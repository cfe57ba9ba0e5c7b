"""Sequence packing for classification: rows keep every token, and a packed model gives
every example exactly its unpacked logits, loss and accuracy (1e-5, float32)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.finetune import packing
from bert_jax.losses import xent_sums
from bert_jax.models.config import BertConfig
from bert_jax.models.task_models import BertForSequenceClassification

TOL = 1e-5


def _examples(n=13, seq=12, seed=0):
  """Unpacked rows: [CLS]=2 ... [SEP]=3 of lengths 3..seq, pair segments, labels."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, seq + 1, size=n)
  ids = np.zeros((n, seq), np.int32)
  types = np.zeros((n, seq), np.int32)
  for i, length in enumerate(lengths):
    ids[i, :length] = rng.integers(5, 40, size=length)
    ids[i, 0], ids[i, length - 1] = 2, 3
    types[i, length // 2:length] = 1
  mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
          "label": rng.integers(0, 3, size=n).astype(np.int32)}


def test_pack_keeps_every_example_whole():
  features = _examples()
  packed = packing.pack(features, max_per_row=4)
  lengths = features["attention_mask"].sum(-1)
  assert sorted(packed["example_index"][packed["example_index"] >= 0]) == list(range(13))
  assert (packed["example_mask"] > 0).sum(-1).max() <= 4
  assert packed["attention_mask"].sum() == lengths.sum()
  for row, slot in zip(*np.nonzero(packed["example_mask"])):
    example, start = packed["example_index"][row, slot], packed["cls_positions"][row, slot]
    span = slice(start, start + lengths[example])
    np.testing.assert_array_equal(packed["input_ids"][row, span],
                                  features["input_ids"][example, :lengths[example]])
    np.testing.assert_array_equal(packed["token_type_ids"][row, span],
                                  features["token_type_ids"][example, :lengths[example]])
    np.testing.assert_array_equal(packed["positions"][row, span], np.arange(lengths[example]))
    assert (packed["segment_ids"][row, span] == slot + 1).all()
    assert packed["label"][row, slot] == features["label"][example]
  assert packing.fill_rate(packed) > packing.fill_rate(features)
  # Best fit in decreasing length: no two rows could have been merged.
  used = packed["attention_mask"].sum(-1)
  slots = (packed["example_mask"] > 0).sum(-1)
  assert not any(used[a] + used[b] <= 12 and slots[a] + slots[b] <= 4
                 for a in range(len(used)) for b in range(a + 1, len(used)))


def test_pack_refuses_token_labels_and_long_examples():
  features = _examples()
  with pytest.raises(ValueError, match="packing supports sequence classification"):
    packing.pack({**features, "labels": features["input_ids"]})
  with pytest.raises(ValueError, match="more than the row length 4"):
    packing.assign_rows(np.array([3, 5]), 4, 2)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_packed_logits_loss_and_accuracy_equal_unpacked(family):
  config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=20, family=family,
                      type_vocab_size=2 if family == "bert" else 1,
                      pad_token_id=0 if family == "bert" else 1)
  features = _examples()
  if family == "roberta":  # its padding id is 1 (positions are counted past it)
    features["input_ids"] = np.where(features["attention_mask"] > 0, features["input_ids"], 1)
  packed = packing.pack(features, max_per_row=4, pad_id=config.pad_token_id)
  model = BertForSequenceClassification(config, num_labels=3)
  variables = model.init(jax.random.key(0), jnp.asarray(features["input_ids"]))
  unpacked = model.apply(variables, *(jnp.asarray(features[k]) for k in packing.TOKEN_KEYS))
  out = model.apply(variables, *(jnp.asarray(packed[k]) for k in packing.TOKEN_KEYS),
                    packing={k: jnp.asarray(packed[k]) for k in packing.PACKING_KEYS})
  logits = np.asarray(out.logits)  # [R, K, C]
  real = packed["example_mask"] > 0
  np.testing.assert_allclose(logits[real], np.asarray(unpacked.logits)[packed["example_index"][real]],
                             atol=TOL)
  loss, correct = xent_sums(out.logits, jnp.asarray(packed["label"]),
                            jnp.asarray(packed["example_mask"]))
  ref_loss, ref_correct = xent_sums(unpacked.logits, jnp.asarray(features["label"]))
  np.testing.assert_allclose(float(loss), float(ref_loss), rtol=TOL)
  assert float(correct) == float(ref_correct)


@pytest.mark.parametrize("task_name", ["sst2", "stsb"])
def test_glue_task_loss_on_packed_rows_equals_unpacked(task_name):
  """The trainer's path: GlueTask.forward / loss_sums / denominators / loss."""
  from bert_jax.finetune.glue import GlueTask
  from configs import glue
  config = glue.get_config(f"task={task_name},runlocal=True")
  model_config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=20)
  task = GlueTask(config, model_config)
  model = task.build_model()
  features = _examples()
  if task.dataset.is_regression:
    features["label"] = np.linspace(0, 5, 13).astype(np.float32)
  packed = packing.pack(features, max_per_row=3)
  params = model.init(jax.random.key(0), jnp.asarray(features["input_ids"]))["params"]

  def loss(batch):
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    outputs = task.forward(model, params, batch, deterministic=True)
    sums, denominators = task.loss_sums(outputs, batch), task.denominators(batch)
    return float(task.loss(sums, denominators)), task.metrics(sums, denominators)

  ours, ours_metrics = loss(packed)
  ref, ref_metrics = loss(features)
  np.testing.assert_allclose(ours, ref, rtol=TOL)
  for key in ref_metrics:
    np.testing.assert_allclose(float(ours_metrics[key]), float(ref_metrics[key]), rtol=TOL)
  with pytest.raises(ValueError, match="the conll task has no packed form"):
    from bert_jax.finetune.conll import ConllTask
    from configs import conll
    conll_config = conll.get_config("runlocal=True")
    conll_config.data.packing = 4
    ConllTask(conll_config, model_config)
