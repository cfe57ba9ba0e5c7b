"""SpanBERT's pretraining: the span boundary head against a numpy reference, a tiny
`mlm,sbo` run on span masks, and resume after SIGKILL of such a run (tiny shapes)."""
import json
import math
import os
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest

from bert_jax.run import trainer
from bert_jax.models.config import config_for_size
from bert_jax.models.heads import SpanBoundaryHead
from bert_jax.pretrain import masking
from bert_jax.pretrain.task import PretrainingTask
from configs import spanbert
from tests.helpers.runs import set_fields, sigkill_when, TINY_PRETRAINING, tiny_pretraining_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPAN_RUN = {"objectives": "mlm,sbo", "data.masking": "span",
            "data.example_builder": "doc_sentences"}


def rows(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


def reference_sbo(params, sequence, table, left, right, offset, eps, max_span_tokens):
  """numpy: [h_left; h_right; pos(offset)] -> (dense, exact GeLU, LayerNorm) x 2 -> E^T + b."""
  gather = lambda positions: np.take_along_axis(sequence, positions[:, :, None], 1)  # noqa: E731
  position = params["position_embeddings"]["embedding"][np.minimum(offset, max_span_tokens - 1)]
  x = np.concatenate([gather(left), gather(right), position], -1).astype(np.float64)
  for i in (1, 2):
    dense, norm = params[f"dense_{i}"], params[f"layer_norm_{i}"]
    x = x @ dense["kernel"] + dense["bias"]
    x = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    x = x * norm["scale"] + norm["bias"]
  return x @ table.T + params["output_bias"]


def test_span_boundary_head_equals_numpy_reference():
  config = config_for_size("tiny", hidden_size=32, intermediate_size=64, num_attention_heads=2,
                           vocab_size=50)
  rng = np.random.default_rng(0)
  b, t, p = 3, 12, 5
  sequence = rng.normal(size=(b, t, 32)).astype(np.float32)
  table = rng.normal(size=(50, 32)).astype(np.float32)
  left = rng.integers(0, t, (b, p)).astype(np.int32)
  right = rng.integers(0, t, (b, p)).astype(np.int32)
  offset = np.array([[0, 1, 2, 40, 3]] * b, np.int32)  # 40: past the table, clipped
  head = SpanBoundaryHead(config, max_span_tokens=8)
  variables = head.init(jax.random.key(0), sequence, table, left, right, offset)
  params = jax.tree.map(np.asarray, nn.unbox(variables)["params"])
  params["output_bias"] = rng.normal(size=50).astype(np.float32)  # not zeros
  got = head.apply({"params": params}, sequence, table, left, right, offset)
  want = reference_sbo(params, sequence, table, left, right, offset, config.layer_norm_eps, 8)
  assert got.shape == (b, p, 50)
  np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=1e-5)


def test_the_sbo_head_and_span_fields_come_only_with_sbo(corpus):
  with_sbo = PretrainingTask(tiny_pretraining_config(corpus, **SPAN_RUN),
                             config_for_size("tiny"))
  without = PretrainingTask(tiny_pretraining_config(corpus, objectives="mlm"),
                            config_for_size("tiny"))
  assert with_sbo.model_spec()["span_boundary_head"] is True
  assert "span_boundary_head" not in without.model_spec()
  assert set(masking.SPAN_FIELDS) <= set(with_sbo.example_batch(2))
  assert not set(masking.SPAN_FIELDS) & set(without.example_batch(2))


_KILL_RUN_STEPS = 40
# configs/spanbert.py:runlocal=True at tiny shapes: the CLI run that is killed and, in this
# process, the uninterrupted run (the SIGKILL test's reference, whose logs the SBO test reads).
_SPAN_RUN_OVERRIDES = {**TINY_PRETRAINING, "num_train_steps": _KILL_RUN_STEPS,
                       "eval_every_steps": 0}


def _span_config(corpus):
  return set_fields(spanbert.get_config(f"corpus={corpus},runlocal=True"), _SPAN_RUN_OVERRIDES)


@pytest.fixture(scope="module")
def span_run(corpus, tmp_path_factory):
  """An uninterrupted 40-step `mlm,sbo` run on span masks: (workdir, its final metrics)."""
  workdir = str(tmp_path_factory.mktemp("span_run"))
  return workdir, trainer.train_and_evaluate(_span_config(corpus), workdir)


@pytest.mark.slow
def test_tiny_span_sbo_run_logs_sbo(span_run):
  workdir, final = span_run
  train = [r for r in rows(workdir) if "sbo_loss" in r]
  assert len(train) == _KILL_RUN_STEPS
  assert all(np.isfinite([r["sbo_loss"], r["sbo_accuracy"], r["mlm_loss"]]).all()
             for r in train)
  assert abs(train[0]["sbo_loss"] - math.log(30522)) < 0.5  # starts at the uniform guess
  assert train[-1]["sbo_loss"] < train[0]["sbo_loss"] - 0.1
  assert np.isfinite(final["eval_sbo_accuracy"]) and "eval_sbo_loss" in final
  model_config = json.load(open(os.path.join(workdir, "model_config.json")))
  assert model_config["model"]["span_boundary_head"] is True


def _train_cmd(corpus, workdir):
  return [sys.executable, "-m", "bert_jax.train",
          f"--config={REPO}/configs/spanbert.py:corpus={corpus},runlocal=True",
          f"--workdir={workdir}",
          *[f"--config.{k}={v}" for k, v in _SPAN_RUN_OVERRIDES.items()]]


def _losses(workdir):
  if not os.path.exists(os.path.join(workdir, "metrics.jsonl")):
    return {}
  return {r["step"]: (r["loss"], r["sbo_loss"]) for r in rows(workdir) if "loss" in r}


@pytest.mark.slow
def test_sigkill_and_resume_of_a_span_sbo_run_gives_identical_losses(corpus, span_run,
                                                                    tmp_path, capsys):
  """The CLI run killed -9 and started again (in this process, on the config the CLI
  builds); span_run (the same config) is the reference."""
  reference, resumed = span_run[0], str(tmp_path / "resumed")
  sigkill_when(_train_cmd(corpus, resumed),
               lambda: max(_losses(resumed), default=0) >= 10)  # past the checkpoint at 8
  killed_at = max(_losses(resumed))
  assert 10 <= killed_at < _KILL_RUN_STEPS, killed_at
  capsys.readouterr()
  trainer.train_and_evaluate(_span_config(corpus), resumed)
  assert "Resumed" in capsys.readouterr().out
  ref, got = _losses(reference), _losses(resumed)
  assert sorted(got) == list(range(1, _KILL_RUN_STEPS + 1))
  for step in ref:
    for a, b in zip(ref[step], got[step]):
      assert abs(a - b) <= 1e-6 * max(1.0, abs(a)), (step, ref[step], got[step])
