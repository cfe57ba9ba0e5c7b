"""End-to-end training on a shrunken config: real steps on real text (lm1b train_test style)."""
import json
import os
import shutil
import sys

import jax
import numpy as np
import pytest

import bert_jax
from bert_jax.run import trainer
from configs import glue, tiny
from tests.helpers.runs import set_fields, sigkill_when, tiny_pretraining_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def small_config(corpus, **changes):
  return tiny_pretraining_config(corpus, **changes)


def read_rows(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


def train_losses(workdir):
  return {r["step"]: r["loss"] for r in read_rows(workdir) if "loss" in r}


@pytest.mark.slow
def test_training_reduces_loss_and_writes_outputs(corpus, tmp_path):
  config = small_config(corpus, num_train_steps=30, **{"optim.learning_rate": 3e-3})
  final = trainer.train_and_evaluate(config, str(tmp_path))
  losses = train_losses(str(tmp_path))
  assert sorted(losses) == list(range(1, 31))
  assert np.mean([losses[s] for s in range(26, 31)]) < losses[1] - 0.5
  rows = read_rows(str(tmp_path))
  required = {"step", "loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy",
              "learning_rate", "tokens_per_sec", "grad_norm", "param_norm"}
  assert required <= set(rows[0])
  # param_norm is computed where the run logs (not in the step): the final params' norm.
  _, variables = bert_jax.load_pretrained(str(tmp_path))
  norm = np.sqrt(sum(np.sum(np.square(np.asarray(x))) for x in jax.tree.leaves(variables)))
  last = [r for r in rows if "param_norm" in r][-1]
  assert last["step"] == 30 and abs(last["param_norm"] - norm) < 1e-5 * norm
  assert any("eval_mlm_accuracy" in r for r in rows)
  assert "eval_mlm_accuracy" in final
  assert os.listdir(tmp_path / "tensorboard")
  assert "30" in os.listdir(tmp_path / "checkpoints")


@pytest.mark.slow
def test_grad_accumulation_equals_big_batch(corpus, tmp_path):
  no_dropout = {"model.hidden_dropout_prob": 0.0, "model.attention_probs_dropout_prob": 0.0,
                "num_train_steps": 3, "eval_every_steps": 0}
  trainer.train_and_evaluate(small_config(corpus, **no_dropout), str(tmp_path / "big"))
  trainer.train_and_evaluate(small_config(corpus, grad_accum_steps=4, **no_dropout),
                             str(tmp_path / "accum"))
  big, accum = train_losses(str(tmp_path / "big")), train_losses(str(tmp_path / "accum"))
  assert big.keys() == accum.keys() == {1, 2, 3}
  for step in big:
    assert abs(big[step] - accum[step]) <= 1e-5 * abs(big[step]), (step, big, accum)


@pytest.fixture(scope="module")
def pretrained(corpus, tmp_path_factory):
  """A 4-step pretraining workdir, read (never written) by the tests that start from it."""
  workdir = str(tmp_path_factory.mktemp("pretrained"))
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=4, eval_every_steps=0),
                             workdir)
  return workdir


@pytest.mark.slow
def test_init_from_pretrained_workdir(corpus, pretrained, tmp_path):
  first = pretrained
  second = small_config(corpus, num_train_steps=1, init_from=first, eval_every_steps=0)
  trainer.train_and_evaluate(second, str(tmp_path / "second"))
  assert train_losses(str(tmp_path / "second"))[1] < train_losses(first)[1]
  wrong = small_config(corpus, num_train_steps=1, init_from=first)
  wrong.model.intermediate_size = 48
  with pytest.raises(ValueError, match="intermediate.*shape"):
    trainer.train_and_evaluate(wrong, str(tmp_path / "third"))


def test_pretraining_workdir_fine_tunes(pretrained, tmp_path):
  """The main job's second half: SST-2 from a pretraining workdir (its vocab.txt included)."""
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.init_from = pretrained
  config.data.max_seq_length = 32
  trainer.train_and_evaluate(config, str(tmp_path / "sst2"))
  with open(tmp_path / "sst2" / "eval_results.json") as f:
    results = json.load(f)
  assert results["step"] == 8 and 0.0 <= results["eval_accuracy"] <= 1.0
  with open(tmp_path / "sst2" / "model_config.json") as f:
    assert json.load(f)["hidden_size"] == 32  # the pretrained architecture, not MiniLM's


def test_vocab_that_does_not_fit_the_model_is_an_error(corpus, tmp_path, vocab_path):
  small_vocab = tmp_path / "vocab-1000.txt"
  with open(vocab_path) as f:
    small_vocab.write_text("".join(f.readlines()[:1000]))
  config = small_config(corpus, **{"data.vocab_path": str(small_vocab)})
  with pytest.raises(ValueError, match=r"vocab-1000.txt has 1000 entries but the model's "
                     r"vocab_size is 30522: set --config.model.vocab_size=1000"):
    trainer.train_and_evaluate(config, str(tmp_path / "run"))
  assert not os.path.exists(tmp_path / "run" / "metrics.jsonl")


# Long enough that the run is still going when the test sees step 10 and kills it (a step
# takes ~70 ms here, a checkpoint ~0.8 s; with 16 steps the run could finish between two
# polls). Checkpoints every 8 steps: each save is most of a step's cost at these shapes.
_KILL_RUN_STEPS = 40


def _latest_checkpoint(workdir):
  path = os.path.join(workdir, "checkpoints")
  steps = [int(d) for d in os.listdir(path) if d.isdigit()] if os.path.isdir(path) else []
  return max(steps, default=0)


# The killed run's overrides of configs/tiny.py:runlocal=True; the CLI and the in-process
# reference both take them (one source, so the two configs are the same).
_KILL_RUN = {"model.hidden_size": 32, "model.intermediate_size": 64,
             "model.max_position_embeddings": 64, "data.max_seq_length": 32,
             "data.max_predictions_per_seq": 5, "data.cache_dir": "",
             "num_train_steps": _KILL_RUN_STEPS, "log_every_steps": 1,
             "checkpoint_every_steps": 8, "eval_every_steps": 0}


def _train_cmd(corpus, workdir):
  return [sys.executable, "-m", "bert_jax.train",
          f"--config={REPO}/configs/tiny.py:corpus={corpus},runlocal=True",
          f"--workdir={workdir}", *[f"--config.{k}={v}" for k, v in _KILL_RUN.items()]]


def _kill_config(corpus):
  return set_fields(tiny.get_config(f"corpus={corpus},runlocal=True"), _KILL_RUN)


@pytest.mark.slow
def test_sigkill_and_resume_gives_identical_losses(corpus, tmp_path, capsys):
  """Kill -9 mid-run, start the same run again: the losses equal an uninterrupted run's."""
  reference, resumed = str(tmp_path / "reference"), str(tmp_path / "resumed")
  # The uninterrupted reference and the rerun train in this process (no interpreter
  # start-up), on the config the CLI builds from the same overrides.
  trainer.train_and_evaluate(_kill_config(corpus), reference)
  sigkill_when(_train_cmd(corpus, resumed), lambda: _latest_checkpoint(resumed) >= 8
               and max(train_losses(resumed), default=0) >= 10)
  killed_at = max(train_losses(resumed))
  assert 10 <= killed_at < _KILL_RUN_STEPS, killed_at
  capsys.readouterr()
  trainer.train_and_evaluate(_kill_config(corpus), resumed)
  assert "Resumed" in capsys.readouterr().out
  ref, got = train_losses(reference), train_losses(resumed)
  assert sorted(got) == list(range(1, _KILL_RUN_STEPS + 1))
  for step in ref:
    assert abs(ref[step] - got[step]) <= 1e-6 * max(1.0, abs(ref[step])), (step, ref[step],
                                                                          got[step])


@pytest.mark.slow
def test_wsd_run_continues_from_a_checkpoint_before_its_decay(corpus, tmp_path):
  """optim.schedule=wsd: a 10-step run's step-8 checkpoint (its decay starts at 8) continued
  with num_train_steps=16 trains steps 9-16 exactly as a 16-step run does (same rates, data
  position, losses): the pre-decay checkpoint of a short run is one of the longer run."""
  wsd = {"optim.schedule": "wsd", "optim.decay_fraction": 0.2, "optim.warmup_steps": 2,
         "optim.learning_rate": 3e-3, "checkpoint_every_steps": 4, "eval_every_steps": 0,
         "model.hidden_dropout_prob": 0.0, "model.attention_probs_dropout_prob": 0.0}
  short, long = str(tmp_path / "short"), str(tmp_path / "long")
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=10, **wsd), short)
  for step in os.listdir(os.path.join(short, "checkpoints")):
    if step.isdigit() and int(step) > 8:  # keep the last checkpoint before the decay
      shutil.rmtree(os.path.join(short, "checkpoints", step))
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=16, **wsd), short)
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=16, **wsd), long)
  # On resume the log keeps the rows up to the restored step: those after 8 are the new run's.
  rows = [r for r in read_rows(short) if "loss" in r]
  assert [r["step"] for r in rows] == list(range(1, 17))
  continued = {r["step"]: (r["loss"], r["learning_rate"]) for r in rows if r["step"] > 8}
  straight = {r["step"]: (r["loss"], r["learning_rate"]) for r in read_rows(long) if "loss" in r}
  assert sorted(continued) == list(range(9, 17))
  for step, (loss, lr) in continued.items():
    assert lr == straight[step][1] and abs(loss - straight[step][0]) <= 1e-5 * loss, step
  assert straight[12][1] == pytest.approx(3e-3) and straight[16][1] < 2e-3  # peak, then decay
