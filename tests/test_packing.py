"""Sequence packing for classification and tagging: rows keep every token, and a packed
model gives every example exactly its unpacked logits, loss, accuracy and entity F1 (1e-5,
float32)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.finetune import example_packing
from bert_jax.core.losses import xent_sums
from bert_jax.models.config import BertConfig
from bert_jax.models.headed import BertForSequenceClassification

TOL = 1e-5


def _examples(n=13, seq=12, seed=0, longest=None):
  """Unpacked rows: [CLS]=2 ... [SEP]=3 of lengths 3..longest (seq), pair segments, labels."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, (longest or seq) + 1, size=n)
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
  packed = example_packing.pack(features, max_per_row=4)
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
  assert example_packing.fill_rate(packed) > example_packing.fill_rate(features)
  # Best fit in decreasing length: no two rows could have been merged.
  used = packed["attention_mask"].sum(-1)
  slots = (packed["example_mask"] > 0).sum(-1)
  assert not any(used[a] + used[b] <= 12 and slots[a] + slots[b] <= 4
                 for a in range(len(used)) for b in range(a + 1, len(used)))


def test_pack_as_many_as_fit():
  """packing=-1: no cap, so no two rows could have been merged at all; the slots K are
  the most examples a row got."""
  features = _examples(n=40, seq=12, longest=5)
  packed = example_packing.pack(features, max_per_row=-1)
  used = packed["attention_mask"].sum(-1)
  assert not any(used[a] + used[b] <= 12 for a in range(len(used))
                 for b in range(a + 1, len(used)))
  assert packed["example_mask"].shape[1] == (packed["example_mask"] > 0).sum(-1).max()
  assert example_packing.fill_rate(packed) > example_packing.fill_rate(example_packing.pack(features, max_per_row=2))
  assert sorted(packed["example_index"][packed["example_index"] >= 0]) == list(range(40))


def _lay_out_loop(features, rows, slots, pad_id):
  """A plain-Python copy of the layout rule, example by example (the reference)."""
  from bert_jax.core import packed_rows as layout
  lengths = features["attention_mask"].sum(-1)
  seq_len = features["attention_mask"].shape[1]
  token_keys = [k for k, v in features.items() if np.ndim(v) == 2]
  out = {k: np.zeros((len(rows), seq_len), features[k].dtype) for k in token_keys}
  out["input_ids"][:] = pad_id
  out.update({k: np.zeros((len(rows), seq_len), np.int32) for k in ("segment_ids", "positions")})
  out.update({k: np.zeros((len(rows), slots), v.dtype) for k, v in features.items()
              if np.ndim(v) == 1})
  out["cls_positions"] = np.zeros((len(rows), slots), np.int32)
  out["example_index"] = np.full((len(rows), slots), -1, np.int32)
  out["example_mask"] = np.zeros((len(rows), slots), np.float32)
  for row, examples in enumerate(rows):
    start = 0
    for slot, example in enumerate(examples):
      n = lengths[example]
      for key in token_keys:
        out[key][row, start:start + n] = features[key][example, :n]
      out["segment_ids"][row, start:start + n] = slot + 1
      out["positions"][row, start:start + n] = np.arange(n)
      out["cls_positions"][row, slot] = start
      out["example_index"][row, slot] = example
      out["example_mask"][row, slot] = 1.0
      for key, values in features.items():
        if np.ndim(values) == 1:
          out[key][row, slot] = values[example]
      start += n
  assert set(out) == set(layout.lay_out(features, rows, slots, pad_id))
  return out


@pytest.mark.parametrize("seed, max_per_row", [(0, 4), (1, -1), (2, 1), (3, 3)])
def test_lay_out_equals_the_example_by_example_rule(seed, max_per_row):
  from bert_jax.core import packed_rows as layout
  features = _examples(n=57, seq=16, seed=seed, longest=9)
  features["tags"] = np.random.default_rng(seed).integers(-1, 9, (57, 16)).astype(np.int64)
  features["score"] = np.random.default_rng(seed).random(57).astype(np.float32)
  rows = layout.assign_rows(features["attention_mask"].sum(-1), 16, max_per_row)
  slots = max(map(len, rows)) + 1  # one slot more than any row needs: left empty
  got = layout.lay_out(features, rows, slots, pad_id=7)
  want = _lay_out_loop(features, rows, slots, pad_id=7)
  for key in want:
    assert got[key].dtype == want[key].dtype, key
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
  empty = layout.lay_out(features, [], 2, pad_id=7)
  assert empty["input_ids"].shape == (0, 16) and empty["example_mask"].shape == (0, 2)
  with pytest.raises(ValueError, match=r"row 1's examples hold 18 tokens, more than the row "
                     r"length 16"):
    layout.lay_out(features, [[0], [int(np.argmax(features["attention_mask"].sum(-1) == 9))] * 2],
                   2)


def test_pack_refuses_bad_features_caps_and_long_examples():
  features = _examples()
  with pytest.raises(ValueError, match=r"neither per example \[N\] nor per token"):
    example_packing.pack({**features, "span": np.zeros((13, 2), np.int32)})
  with pytest.raises(ValueError, match="more than the row length 4"):
    example_packing.assign_rows(np.array([3, 5]), 4, 2)
  with pytest.raises(ValueError, match="config.data.packing=-2"):
    example_packing.assign_rows(np.array([3, 5]), 8, -2)


# A classifier's sentence-vector options: pooling, or feature-based heads (models/headed.py).
_SENTENCE_HEADS = {
    "pooler": {}, "mean": {"pooling": "mean"}, "features": {"feature_layers": (-2, -1)},
    "bilstm": {"feature_layers": (0, 1, 2), "feature_mix": "scalar_mix",
               "feature_head": "bilstm"}}


@pytest.mark.slow
@pytest.mark.parametrize("family,head", [
    ("bert", "pooler"), ("roberta", "pooler"), ("modernbert", "pooler"), ("bert", "mean"),
    ("modernbert", "mean"), ("bert", "features"), ("bert", "bilstm")])
def test_packed_logits_loss_and_accuracy_equal_unpacked(family, head):
  """Every sentence vector a classifier can read (the pooled [CLS], the mean of the
  example's tokens, the [CLS] of chosen layers, a BiLSTM over the scalar mix of every
  layer, averaged over the example's tokens) is each example's own in a packed row."""
  # ModernBERT: rotary positions restart per example; its local layer (layer 1, a window
  # of +-2 tokens) stays inside each example.
  config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=20, family=family,
                      type_vocab_size=2 if family == "bert" else 1,
                      pad_token_id=0 if family == "bert" else 1,
                      global_attn_every_n_layers=2, local_attention=4)
  features = _examples()
  if family != "bert":  # padding id 1 (RoBERTa counts its positions past it)
    features["input_ids"] = np.where(features["attention_mask"] > 0, features["input_ids"], 1)
  packed = example_packing.pack(features, max_per_row=4, pad_id=config.pad_token_id)
  model = BertForSequenceClassification(config, num_labels=3, **_SENTENCE_HEADS[head])
  variables = model.init(jax.random.key(0), jnp.asarray(features["input_ids"]))
  unpacked = model.apply(variables, *(jnp.asarray(features[k]) for k in example_packing.TOKEN_KEYS))
  out = model.apply(variables, *(jnp.asarray(packed[k]) for k in example_packing.TOKEN_KEYS),
                    packing={k: jnp.asarray(packed[k]) for k in example_packing.PACKING_KEYS})
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
  config = glue.get_config(f"dataset={task_name},runlocal=True")
  model_config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=20)
  task = GlueTask(config, model_config)
  model = task.build_model()
  features = _examples()
  if task.dataset.is_regression:
    features["label"] = np.linspace(0, 5, 13).astype(np.float32)
  packed = example_packing.pack(features, max_per_row=3)
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
  with pytest.raises(ValueError, match="config.data.packing=4: the squad task has no packed"):
    from bert_jax.finetune.squad import SquadTask
    from configs import squad
    squad_config = squad.get_config("runlocal=True")
    squad_config.data.packing = 4
    SquadTask(squad_config, model_config)


def _sentences(n=11, seq=12, seed=1):
  """CoNLL-style unpacked rows: words of 1-2 pieces, a tag at each first piece."""
  from bert_jax.finetune import conll_reader
  rng = np.random.default_rng(seed)
  ids = np.zeros((n, seq), np.int32)
  labels = np.zeros((n, seq), np.int32)
  weights = np.zeros((n, seq), np.float32)
  word_index = np.full((n, seq), -1, np.int32)
  sentences = []
  for row in range(n):
    pieces, words = [2], 0
    for word in range(rng.integers(1, 6)):
      if len(pieces) + 2 > seq - 1:
        break
      labels[row, len(pieces)] = rng.integers(0, len(conll_reader.LABELS))
      weights[row, len(pieces)], word_index[row, len(pieces)] = 1.0, word
      pieces += list(rng.integers(5, 40, size=rng.integers(1, 3)))
      words += 1
    pieces.append(3)
    ids[row, :len(pieces)] = pieces
    tags = tuple(conll_reader.LABELS[t] for t in labels[row][word_index[row] >= 0])
    sentences.append(conll_reader.Sentence(tuple(f"w{i}" for i in range(words)), tags, ""))
  features = {"input_ids": ids, "token_type_ids": np.zeros_like(ids),
              "attention_mask": (ids > 0).astype(np.int32), "labels": labels,
              "label_weights": weights}
  return features, conll_reader.TaggingMetadata(sentences, word_index)


@pytest.mark.slow
@pytest.mark.parametrize("head", [{}, {"feature_layers": "0,1,2", "feature_mix": "scalar_mix",
                                      "feature_head": "bilstm"}])
def test_conll_packed_loss_and_entity_f1_equal_unpacked(head):
  """Tagging: per-token labels and label weights ride in the packed rows; the trainer's
  loss and accuracy, every token's logits and the entity F1 equal the unpacked ones
  (fine-tuned, and a BiLSTM tagger on a scalar mix, whose recurrences restart at each
  packed example)."""
  import dataclasses

  from bert_jax.finetune import conll_reader
  from bert_jax.finetune.conll import ConllTask
  from configs import conll
  config = conll.get_config("runlocal=True")
  config.update(head)
  config.data.pack_each_batch = False  # whole-set packing instead
  config.data.packing = -1
  model_config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=20)
  task = ConllTask(config, model_config)
  model = task.build_model()
  features, metadata = _sentences()
  packed = example_packing.pack(features, config.data.packing)
  assert len(packed["input_ids"]) < len(features["input_ids"])
  np.testing.assert_array_equal(example_packing.unpack_tokens(packed, packed["labels"], 11),
                                features["labels"])
  params = model.init(jax.random.key(0), jnp.asarray(features["input_ids"]))["params"]

  def run(batch):
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    outputs = task.forward(model, params, batch, deterministic=True)
    sums, denominators = task.loss_sums(outputs, batch), task.denominators(batch)
    return (np.asarray(outputs.logits), float(task.loss(sums, denominators)),
            {k: float(v) for k, v in task.metrics(sums, denominators).items()})

  logits, loss, metrics = run(packed)
  ref_logits, ref_loss, ref_metrics = run(features)
  logits = example_packing.unpack_tokens(packed, logits, 11)
  real = features["attention_mask"] > 0
  np.testing.assert_allclose(logits[real], ref_logits[real], atol=TOL)
  np.testing.assert_allclose(loss, ref_loss, rtol=TOL)
  assert metrics["accuracy"] == pytest.approx(ref_metrics["accuracy"], abs=TOL)
  # Gold tags = the unpacked model's own tags on every other sentence: a non-trivial F1.
  predicted, _ = conll_reader.word_tags(ref_logits.argmax(-1), metadata.word_index,
                                        metadata.sentences)
  metadata = conll_reader.TaggingMetadata(
      [dataclasses.replace(s, tags=tuple(p)) if i % 2 else s
       for i, (s, p) in enumerate(zip(metadata.sentences, predicted))], metadata.word_index)
  scores, ref_scores = task.score({"logits": logits}, metadata), task.score(
      {"logits": ref_logits}, metadata)
  assert 0.0 < ref_scores["f1"] < 1.0
  assert scores == ref_scores


# --- pack_each_batch: each batch's examples packed, the batches those of unpacked training -

def _packed_examples(packed):
  """{local example index: (its tokens, its label)} of a PackedBatches batch."""
  out = {}
  for row, slot in zip(*np.nonzero(packed["example_mask"])):
    start = packed["cls_positions"][row, slot]
    length = int((packed["segment_ids"][row] == slot + 1).sum())
    out[int(packed["example_index"][row, slot])] = (
        tuple(packed["input_ids"][row, start:start + length]), int(packed["label"][row, slot]))
  return out


@pytest.mark.parametrize("process_count", [1, 2])
def test_pack_each_batch_holds_exactly_the_unpacked_batches(process_count):
  from bert_jax.finetune.array_input import ArrayInput
  features = _examples(n=40, seq=12, longest=9)
  plain = ArrayInput(features, 8, seed=3)  # the global batches unpacked training sees
  packed = [example_packing.PackedBatches(features, 8, seed=3, rows_multiple=2, pad_id=0,
                                  process_index=p, process_count=process_count)
            for p in range(process_count)]
  assert packed[0].steps_per_epoch == plain.steps_per_epoch == 5
  local = 8 // process_count
  for _ in range(7):  # into the second epoch (reshuffled)
    batch = next(plain)
    shares = [next(p) for p in packed]
    rows = {s["input_ids"].shape for s in shares}
    assert len(rows) == 1, "every process gets the same shape"
    r, t = rows.pop()
    assert t == 12 and r % 2 == 0 and r <= local
    for p, share in enumerate(shares):
      mask = batch["attention_mask"][p * local:(p + 1) * local]
      want = {i: (tuple(batch["input_ids"][p * local + i][mask[i] > 0]),
                  int(batch["label"][p * local + i])) for i in range(local)}
      assert _packed_examples(share) == want
      assert share["attention_mask"].sum() == mask.sum()  # no token lost or added
    fewest = max(len(example_packing.assign_rows(batch["attention_mask"][p * local:(p + 1) * local]
                                         .sum(-1), 12, local)) for p in range(process_count))
    assert r == min(-(-fewest // 2) * 2, local)


def test_pack_each_batch_resumes_and_lists_its_shapes():
  features = _examples(n=40, seq=12, longest=9)
  a = example_packing.PackedBatches(features, 8, seed=1, rows_multiple=3)
  for _ in range(6):
    next(a)
  b = example_packing.PackedBatches(features, 8, seed=1, rows_multiple=3)
  b.restore(a.state())
  for _ in range(3):
    x, y = next(a), next(b)
    assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
  # widths(): the row counts of the first epoch's batches, each a multiple of 3 (or all 8).
  fresh = example_packing.PackedBatches(features, 8, seed=1, rows_multiple=3)
  seen = sorted({next(fresh)["input_ids"].shape[0] for _ in range(fresh.steps_per_epoch)})
  assert a.widths() == seen and set(seen) <= {3, 6, 8}
  shapes = [e["input_ids"].shape for e in a.width_examples()]
  assert shapes == [(r, 12) for r in seen]
  assert all(e["cls_positions"].shape == (r, 8) for e, (r, _) in zip(a.width_examples(), shapes))
  with pytest.raises(ValueError, match="packed_rows_multiple=0"):
    example_packing.PackedBatches(features, 8, rows_multiple=0)
  with pytest.raises(ValueError, match="config.data.packing=-3"):
    example_packing.PackedBatches(features, 8, max_per_row=-3)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_pack_each_batch_trains_exactly_as_dynamic_padding(tmp_path, vocab_path, family):
  """The CLI's path end to end, dropout off: every logged training loss and the eval
  metrics of a packed-batches run equal the dynamically padded run's (1e-5)."""
  import json
  import os

  from flax import linen as nn

  from bert_jax.weights import checkpoint
  from bert_jax.run import trainer
  from bert_jax.models.bert import BertModel
  from configs import glue
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                      family=family, global_attn_every_n_layers=2, local_attention=8)
  params = nn.unbox(BertModel(config).init(jax.random.key(0), np.zeros((1, 4), np.int32))[
      "params"])
  model_dir = str(tmp_path / "model")
  checkpoint.save_model(model_dir, config, jax.device_get(params), vocab_path=vocab_path)
  runs, fills = {}, {}
  for name, packed in (("padded", False), ("packed", True)):
    run = glue.get_config("dataset=sst2,runlocal=True")
    run.init_from = model_dir
    run.model.hidden_dropout_prob = run.model.attention_probs_dropout_prob = 0.0
    run.log_every_steps = 1
    run.data.pack_each_batch = packed
    run.data.packed_rows_multiple = 2
    workdir = str(tmp_path / name)
    trainer.train_and_evaluate(run, workdir)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      rows = [r for r in map(json.loads, f) if "loss" in r]
    with open(os.path.join(workdir, "eval_results.json")) as f:
      runs[name] = ([r["loss"] for r in rows], json.load(f))
    fills[name] = np.mean([r["fill_rate"] for r in rows])
  (padded, padded_eval), (packed, packed_eval) = runs["padded"], runs["packed"]
  assert fills["packed"] > fills["padded"] + 0.2  # it did pack
  assert len(padded) == len(packed) == 8
  np.testing.assert_allclose(packed, padded, rtol=TOL)
  evals = [k for k in padded_eval if k.startswith("eval_")]
  assert "eval_accuracy" in evals
  for key in evals:
    np.testing.assert_allclose(packed_eval[key], padded_eval[key], rtol=TOL)


_MESH_RUN = r'''
import json, os, sys
import jax, numpy as np
from flax import linen as nn
from bert_jax.weights import checkpoint
from bert_jax.run import trainer
from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig
from configs import glue
assert jax.device_count() == 2
out, vocab = sys.argv[1], sys.argv[2]
config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
params = nn.unbox(BertModel(config).init(jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
checkpoint.save_model(f"{out}/model", config, jax.device_get(params), vocab_path=vocab)
losses = {}
for name, packed in (("padded", False), ("packed", True)):
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from, run.grad_accum_steps, run.log_every_steps = f"{out}/model", 2, 1
  run.data.packed_rows_multiple = 1  # runlocal fixes the row count; here it varies
  run.model.hidden_dropout_prob = run.model.attention_probs_dropout_prob = 0.0
  run.data.pack_each_batch = packed
  trainer.train_and_evaluate(run, f"{out}/{name}")
  with open(f"{out}/{name}/metrics.jsonl") as f:
    losses[name] = [r["loss"] for r in map(json.loads, f) if "loss" in r]
print("LOSSES", json.dumps(losses))
'''


@pytest.mark.slow
def test_pack_each_batch_rows_split_over_devices_and_accumulation(tmp_path, vocab_path):
  """2 devices x 2 accumulation steps: the packed rows (a multiple of 4) split evenly, and
  the losses equal dynamic padding's."""
  import json
  import os
  import subprocess
  import sys
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2 "
                                    "--xla_backend_optimization_level=0",  # as conftest's
         "PYTHONPATH": repo}
  done = subprocess.run([sys.executable, "-c", _MESH_RUN, str(tmp_path), vocab_path],
                        capture_output=True, text=True, cwd=repo, env=env, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  line = next(l for l in done.stdout.splitlines() if l.startswith("LOSSES "))
  losses = json.loads(line.removeprefix("LOSSES "))
  assert "batch shapes ['4x32', '8x32']" in done.stdout or "batch shapes ['8x32']" in done.stdout
  assert len(losses["packed"]) == len(losses["padded"]) == 8
  np.testing.assert_allclose(losses["packed"], losses["padded"], rtol=TOL)
