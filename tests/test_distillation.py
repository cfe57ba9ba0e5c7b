"""Distillation (pretrain/distillation.py): the loss terms equal torch's (HF distiller's
KLDivLoss batchmean x T^2, CosineEmbeddingLoss), the student starts from the chosen
teacher layers, a student equal to its teacher has zero KL and cosine loss, and a run
trains the student only (the teacher's files and params stay as they were, the
checkpoint holds no teacher).

Tiny shapes (H32, T32): the teacher is a 3-layer BERT pretrained here for 6 steps.
"""
import hashlib
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from bert_jax.weights import checkpoint
from bert_jax.run import tasks
from bert_jax.run import trainer
from bert_jax.models.config import BertConfig
from bert_jax.models.headed import PreTrainingOutput
from bert_jax.pretrain import distillation
from tests.helpers.runs import tiny_pretraining_config

STUDENT_LAYERS = "0,2"


@pytest.fixture(scope="module")
def teacher(corpus, tmp_path_factory):
  """A 3-layer tiny BERT (MLM + NSP) pretrained for 6 steps: its workdir."""
  workdir = str(tmp_path_factory.mktemp("teacher"))
  trainer.train_and_evaluate(tiny_pretraining_config(
      corpus, **{"model.num_hidden_layers": 3, "eval_every_steps": 0,
         "num_train_steps": 6}), workdir)
  return workdir


def student_config(corpus, teacher, **changes):
  """configs/distilbert.py's runlocal variant at the tests' tiny shapes."""
  from configs import distilbert
  from tests.helpers.runs import TINY_PRETRAINING, set_fields
  config = distilbert.get_config(f"corpus={corpus},teacher={teacher},runlocal=True")
  return set_fields(config, {**TINY_PRETRAINING, "eval_every_steps": 0,
                             "distillation.student_layers": STUDENT_LAYERS,
                             "model.num_hidden_layers": 2, **changes})


def _forward_on_one_batch(config):
  """(task, params started from the teacher, frozen teacher params, a batch)."""
  setup = trainer.build(config)
  task = setup.task
  params = jax.device_get(setup.init_state(setup.init_rng).params)
  params = jax.tree.map(lambda x: getattr(x, "value", x), params,
                        is_leaf=lambda x: hasattr(x, "value"))
  frozen = task.frozen_params()
  host = frozen.load()
  params, notes = frozen.init_trainable(params, host)
  return task, setup.model, params, host, notes


# ----------------------------------------------------------------------- loss terms
def test_terms_equal_torch_distiller_losses():
  rng = np.random.default_rng(0)
  b, p, t, h, v, temperature = 3, 4, 6, 8, 11, 2.0
  s_logits, t_logits = rng.normal(size=(2, b, p, v)).astype(np.float32) * 3
  s_hidden, t_hidden = rng.normal(size=(2, b, t, h)).astype(np.float32)
  weights = (rng.random((b, p)) < 0.7).astype(np.float32)
  mask = (rng.random((b, t)) < 0.8).astype(np.int32)
  batch = {"masked_lm_weights": jnp.asarray(weights), "attention_mask": jnp.asarray(mask)}
  out = lambda logits, hidden: PreTrainingOutput(  # noqa: E731
      sequence_output=jnp.asarray(hidden), pooled_output=None,
      mlm_logits=jnp.asarray(logits), sentence_logits={})
  outputs = distillation.WithTeacher(**vars(out(s_logits, s_hidden)),
                                     teacher=out(t_logits, t_hidden), temperature=temperature)
  sums = {**distillation.distill_sums(outputs, batch), **distillation.cosine_sums(outputs, batch)}
  dens = {**distillation.distill_denominators(batch),
          **distillation.cosine_denominators(batch)}
  got = {**distillation.distill_metrics(sums, dens), **distillation.cosine_metrics(sums, dens)}

  sel = torch.from_numpy(weights).bool()
  kl = torch.nn.KLDivLoss(reduction="batchmean")(
      torch.log_softmax(torch.from_numpy(s_logits)[sel] / temperature, -1),
      torch.softmax(torch.from_numpy(t_logits)[sel] / temperature, -1)) * temperature ** 2
  real = torch.from_numpy(mask).bool()
  cos = torch.nn.CosineEmbeddingLoss()(torch.from_numpy(s_hidden)[real],
                                       torch.from_numpy(t_hidden)[real],
                                       torch.ones(int(real.sum())))
  np.testing.assert_allclose(float(got["distill_loss"]), kl.item(), rtol=1e-5)
  np.testing.assert_allclose(float(got["cosine_loss"]), cos.item(), rtol=1e-5, atol=1e-7)
  agree = (s_logits.argmax(-1) == t_logits.argmax(-1))[weights > 0].mean()
  np.testing.assert_allclose(float(got["distill_accuracy"]), agree, rtol=1e-6)


def test_bad_student_layers_are_refused(corpus):
  with pytest.raises(ValueError, match="names 2 teacher layers; the student has 3"):
    distillation.parse_layers("0,2", 3, 4)
  with pytest.raises(ValueError, match=r"the teacher has layers 0..3"):
    distillation.parse_layers("0,4", 2, 4)
  config = student_config(corpus, "unused", objectives="mlm", **{"distillation.teacher": ""})
  with pytest.raises(ValueError, match=r"student_layers='0,2' needs a teacher"):
    tasks.make_task(config, trainer.resolve_model_config(config))


def test_a_teacher_without_weights_plans_but_does_not_train(corpus, tmp_path):
  """A teacher folder holding only config.json: the run's task builds (what a compile
  reads: the teacher's architecture), and reading its weights stops in one line naming it."""
  from bert_jax.weights import hf_families
  config = student_config(corpus, "unused")
  teacher = tmp_path / "config_only"
  teacher.mkdir()
  (teacher / "config.json").write_text(json.dumps(hf_families.config_to_hf(
      trainer.resolve_model_config(config).replace(num_hidden_layers=3))))
  config.distillation.teacher = str(teacher)
  task = tasks.make_task(config, trainer.resolve_model_config(config))
  with pytest.raises(ValueError, match=rf"config.distillation.teacher={teacher}: no weights"):
    task.frozen_params().load()
  # The step's model FLOPs: the student's forward and backward and the teacher's forward.
  from bert_jax.core import flops
  batch = {"input_ids": np.zeros((4, 32), np.int32),
           "masked_lm_positions": np.zeros((4, 5), np.int32)}
  student = flops.pretraining_step_flops(task.model_config, 4, 32, 5)
  teacher_forward = flops.mlm_forward_flops(task.teacher.config, 4, 32, 5)
  assert task.teacher.config.num_hidden_layers == 3 and teacher_forward > 0
  assert task.step_flops(batch) == pytest.approx(student + teacher_forward)


@pytest.mark.slow
def test_a_student_from_the_teacher_layers_without_a_teacher_loss(corpus, teacher, tmp_path):
  """student_layers with MLM alone (DistilBERT's init without its soft targets): the
  student starts as the teacher's chosen layers, the step never runs the teacher, and the
  loss is MLM's."""
  config = student_config(corpus, teacher, objectives="mlm", num_train_steps=2,
                          log_every_steps=1)
  setup = trainer.build(config)
  assert not setup.frozen.in_step and setup.frozen_sharding is None
  _, _, params, host, notes = _forward_on_one_batch(config)
  assert "student layers <- teacher layers [0, 2]" in notes
  np.testing.assert_array_equal(
      params["bert"]["encoder"]["layer_1"]["attention"]["query"]["kernel"],
      host["bert"]["encoder"]["layer_2"]["attention"]["query"]["kernel"])
  workdir = str(tmp_path / "student")
  trainer.train_and_evaluate(config, workdir)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f if "loss" in line]
  assert rows and all("distill_loss" not in r for r in rows)
  assert all(r["loss"] == pytest.approx(r["mlm_loss"], rel=1e-6) for r in rows if "loss" in r)


# ---------------------------------------------------------------- student and teacher
def test_student_starts_from_the_chosen_teacher_layers(corpus, teacher):
  _, _, student, host, notes = _forward_on_one_batch(student_config(corpus, teacher))
  assert "student layers <- teacher layers [0, 2]" in notes
  for ours, theirs in (("layer_0", "layer_0"), ("layer_1", "layer_2")):
    jax.tree.map(np.testing.assert_array_equal, student["bert"]["encoder"][ours],
                 host["bert"]["encoder"][theirs])
  for part in ("word_embeddings", "position_embeddings", "layer_norm"):
    jax.tree.map(np.testing.assert_array_equal, student["bert"]["embeddings"][part],
                 host["bert"]["embeddings"][part])
  jax.tree.map(np.testing.assert_array_equal, student["mlm_head"], host["mlm_head"])
  # DistilBERT's student has no segment embeddings and no pooler; the teacher's NSP head
  # is not loaded.
  assert "token_type_embeddings" not in student["bert"]["embeddings"]
  assert "pooler" not in student["bert"] and "nsp_head" not in host


def test_a_student_equal_to_its_teacher_has_zero_kl_and_cosine_loss(corpus, teacher):
  config = student_config(corpus, teacher, **{
      "model.num_hidden_layers": 3, "model.family": "bert", "model.type_vocab_size": 2,
      "distillation.student_layers": "0,1,2"})
  task, model, params, host, _ = _forward_on_one_batch(config)
  rng = np.random.default_rng(0)
  rows, length, slots = 4, config.data.max_seq_length, config.data.max_predictions_per_seq
  mask = np.ones((rows, length), np.int32)
  mask[1, 20:] = 0
  batch = {"input_ids": rng.integers(999, 3000, (rows, length)) * mask,
           "token_type_ids": np.zeros((rows, length), np.int32), "attention_mask": mask,
           "masked_lm_positions": np.sort(rng.choice(np.arange(1, 20), (rows, slots)), -1),
           "masked_lm_ids": rng.integers(999, 3000, (rows, slots)),
           "masked_lm_weights": np.ones((rows, slots), np.float32)}
  batch = jax.tree.map(jnp.asarray, batch)
  forward = task.forward(model, params, batch, deterministic=True, frozen=host)
  metrics = task.metrics(task.loss_sums(forward, batch), task.denominators(batch))
  assert abs(float(metrics["distill_loss"])) < 1e-5, metrics
  assert abs(float(metrics["cosine_loss"])) < 1e-6, metrics
  assert float(metrics["distill_accuracy"]) == 1.0
  assert float(metrics["mlm_loss"]) > 1.0  # the teacher itself is far from perfect


def _hashes(folder):
  out = {}
  for root, _, files in os.walk(folder):
    for name in files:
      with open(os.path.join(root, name), "rb") as f:
        out[os.path.relpath(os.path.join(root, name), folder)] = hashlib.sha256(
            f.read()).hexdigest()
  return out


def test_a_run_trains_the_student_only(corpus, teacher, tmp_path):
  before = _hashes(teacher)
  teacher_params = jax.device_get(checkpoint.load_model_params(teacher)[1])
  workdir = str(tmp_path / "student")
  final = trainer.train_and_evaluate(student_config(corpus, teacher, num_train_steps=4),
                                     workdir)
  assert _hashes(teacher) == before
  jax.tree.map(np.testing.assert_array_equal, teacher_params,
               jax.device_get(checkpoint.load_model_params(teacher)[1]))
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  for key in ("distill_loss", "distill_accuracy", "mlm_loss", "cosine_loss"):
    assert all(np.isfinite(r[key]) for r in rows if "loss" in r), key
  logged = [r for r in rows if "loss" in r][-1]
  assert logged["loss"] == pytest.approx(5 * logged["distill_loss"] + 2 * logged["mlm_loss"]
                                         + logged["cosine_loss"], rel=1e-5)
  assert "eval_distill_loss" in final
  # The checkpoint is the student alone: the student model's params, no teacher layer.
  student, params = checkpoint.load_model_params(workdir)
  assert isinstance(student, BertConfig) and student.num_hidden_layers == 2
  assert sorted(params["bert"]["encoder"]) == ["layer_0", "layer_1"]
  assert sorted(params) == ["bert", "mlm_head"]
