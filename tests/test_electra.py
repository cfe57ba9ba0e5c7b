"""ELECTRA pretraining (pretrain/electra.py, models/electra.py ElectraForPreTraining): the generator
reads the discriminator's embedding tables and has none of its own; the discriminator's
loss sends no gradient to the generator (only the MLM term does); a tiny run's losses
fall; resume after SIGKILL reproduces the uninterrupted losses.

Tiny shapes (H32 discriminator, H8 generator, T32) on wikitext-2 valid.
"""
import json
import os
import signal
import subprocess
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.weights import checkpoint
from bert_jax import weights
from bert_jax.run import trainer
from bert_jax.models import electra, specs
from bert_jax.models.electra import SHARED_EMBEDDINGS
from tests.helpers.runs import set_fields, TINY_PRETRAINING

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OVERRIDES = {**TINY_PRETRAINING, "model.embedding_size": 16, "eval_every_steps": 0,
             "max_checkpoints_to_keep": 3}


def electra_config(corpus, **changes):
  from configs import electra
  config = electra.get_config(f"corpus={corpus},runlocal=True")
  return set_fields(config, {**OVERRIDES, **changes})


def _batch(config, seed=0):
  """A batch of the pipeline's contract (ids within the vocab, 3 masked slots a row)."""
  rng = np.random.default_rng(seed)
  rows, length = 4, config.data.max_seq_length
  slots = config.data.max_predictions_per_seq
  original = rng.integers(999, 3000, (rows, length)).astype(np.int32)
  positions = np.zeros((rows, slots), np.int32)
  positions[:, :3] = np.sort(rng.choice(np.arange(1, length), (rows, 3)), -1)
  weights = (positions > 0).astype(np.float32)
  ids = np.take_along_axis(original, positions, 1) * (weights > 0)
  inputs = original.copy()
  np.put_along_axis(inputs, positions[:, :2], 103, 1)
  return {"input_ids": jnp.asarray(inputs), "token_type_ids": jnp.zeros_like(inputs),
          "attention_mask": jnp.ones_like(inputs), "masked_lm_positions": jnp.asarray(positions),
          "masked_lm_ids": jnp.asarray(ids), "masked_lm_weights": jnp.asarray(weights)}


@pytest.mark.slow
def test_the_generator_shares_the_discriminators_embeddings_and_gets_no_rtd_gradient(corpus):
  setup = trainer.build(electra_config(corpus))
  task, model = setup.task, setup.model
  params = nn.unbox(setup.init_state(setup.init_rng).params)
  assert not set(params["generator"]["bert"].get("embeddings", {})) & set(SHARED_EMBEDDINGS)
  assert set(SHARED_EMBEDDINGS) - {"token_type_embeddings"} <= set(
      params["discriminator"]["bert"]["embeddings"])
  batch = _batch(setup.task.config)

  def losses(p):  # [rtd_loss, mlm_loss]
    forward = task.forward(model, p, batch, deterministic=False, rng=jax.random.key(1))
    metrics = task.metrics(task.loss_sums(forward, batch), task.denominators(batch))
    return jnp.stack([metrics["rtd_loss"], metrics["mlm_loss"]])

  grads = jax.jit(jax.jacrev(losses))(params)  # one compile for both terms' gradients
  rtd, mlm = (jax.tree.map(lambda g, i=i: g[i], grads) for i in (0, 1))
  # The discriminator's loss reaches the generator only through the sampled tokens,
  # which carry no gradient: zero for every generator param.
  assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(rtd["generator"])) == 0.0
  assert float(jnp.abs(rtd["discriminator"]["rtd_head"]["dense"]["kernel"]).max()) > 0
  # The MLM loss trains the generator and, through the tied tables, the shared embeddings.
  assert all(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(mlm["generator"]["mlm_head"]))
  word = mlm["discriminator"]["bert"]["embeddings"]["word_embeddings"]["embedding"]
  assert float(jnp.abs(word).max()) > 0
  # The generator really reads the discriminator's table: changing it changes the logits.
  out = jax.jit(lambda p: model.apply(  # noqa: E731
      {"params": p}, batch["input_ids"], None, None, batch["masked_lm_positions"],
      method="generate").mlm_logits)
  table = params["discriminator"]["bert"]["embeddings"]["word_embeddings"]["embedding"]
  bumped = jax.tree_util.tree_map_with_path(  # noise: a constant shift would cancel in LN
      lambda path, x: x + 0.1 * jax.random.normal(jax.random.key(7), table.shape)
      if "word_embeddings" in jax.tree_util.keystr(path) else x, params)
  assert float(jnp.abs(out(bumped) - out(params)).max()) > 1e-4


def _losses(workdir, key="loss"):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return {r["step"]: r[key] for r in map(json.loads, f) if key in r}


def _cmd(corpus, workdir, steps):
  flags = [f"--config.{k}={v}" for k, v in {**OVERRIDES, "num_train_steps": steps,
                                            "checkpoint_every_steps": 4}.items()]
  return [sys.executable, "-m", "bert_jax.train",
          f"--config={REPO}/configs/electra.py:corpus={corpus},runlocal=True",
          f"--workdir={workdir}", *flags]


@pytest.mark.slow
def test_a_run_learns_and_resumes_after_sigkill_to_the_same_losses(corpus, tmp_path):
  steps = 16
  reference, workdir = str(tmp_path / "reference"), str(tmp_path / "run")
  # The uninterrupted reference and the rerun train in this process, on the config `_cmd`
  # gives the CLI.
  trainer.train_and_evaluate(electra_config(corpus, num_train_steps=steps,
                                            checkpoint_every_steps=4), reference)
  proc = subprocess.Popen(_cmd(corpus, workdir, steps), cwd=REPO, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(os.path.join(workdir, "metrics.jsonl")) and max(
        _losses(workdir), default=0) >= 6:
      break
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait(timeout=60)
  assert proc.returncode == -signal.SIGKILL
  trainer.train_and_evaluate(electra_config(corpus, num_train_steps=steps,
                                            checkpoint_every_steps=4), workdir)
  want, got = _losses(reference), _losses(workdir)
  assert sorted(got) == list(range(1, steps + 1))
  for step in want:
    assert abs(want[step] - got[step]) <= 1e-6 * max(1.0, abs(want[step])), step
  # The losses fall over the 16 steps (the first vs the last four steps' mean).
  for key in ("mlm_loss", "rtd_loss"):
    curve = _losses(reference, key)
    assert np.mean([curve[s] for s in range(13, 17)]) < np.mean(
        [curve[s] for s in range(1, 5)]), (key, curve)
  with open(os.path.join(reference, "eval_results.json")) as f:
    final = json.load(f)
  for key in ("eval_rtd_accuracy", "eval_rtd_baseline_accuracy", "eval_mlm_accuracy"):
    assert 0.0 <= final[key] <= 1.0
  # Fine-tuning (config.init_from) starts from the discriminator; the generator is dropped.
  config = weights.load_config(reference)
  classifier = specs.build(config, {"headed_model": "sequence_classification",
                                         "num_labels": 2})
  fresh = nn.unbox(classifier.init(jax.random.key(0), jnp.zeros((1, 8), jnp.int32))["params"])
  params, notes = weights.init_params(fresh, reference, config)
  saved = checkpoint.load_model_params(reference)[1]["discriminator"]
  jax.tree.map(np.testing.assert_array_equal, params["bert"]["encoder"],
               saved["bert"]["encoder"])
  assert any("rtd_head" in note for note in notes), notes


def test_the_generator_initialises_the_same_under_splash_attention():
  """The generator's params are traced on a [1, 1] row; with the model's attention_impl
  "splash" (which refuses rows that are not multiples of 128) they still initialise, to
  the same tree of shapes as under einsum attention."""
  from bert_jax.models.config import config_for_size
  ids = jnp.zeros((1, 128), jnp.int32)
  trees = []
  for impl in ("einsum", "splash"):
    config = config_for_size("electra-tiny", attention_impl=impl,
                             attention_probs_dropout_prob=0.0)
    model = electra.ElectraForPreTraining(config)
    trees.append(jax.eval_shape(lambda: model.init(jax.random.key(0), ids))["params"]
                 ["generator"])
  assert jax.tree.structure(trees[0]) == jax.tree.structure(trees[1])
  assert [x.shape for x in jax.tree.leaves(trees[0])] == [
      x.shape for x in jax.tree.leaves(trees[1])]
