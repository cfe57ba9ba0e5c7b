"""Never lose a run: refusals that change nothing, NaN before a checkpoint, damaged
checkpoints, SIGTERM, the workdir lock, and reruns of a finished run.

Tiny shapes (H32, T32, a few steps) on wikitext-2 valid; the uninterrupted reference run
is shared by the module.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from bert_jax.run import trainer
from bert_jax.run import workdir as workdir_lib
from tests.helpers.runs import TINY_PRETRAINING, tiny_pretraining_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 12


OVERRIDES = {**TINY_PRETRAINING, "eval_every_steps": 0, "max_checkpoints_to_keep": 3}


def small_config(corpus, **changes):
  return tiny_pretraining_config(corpus, **{"eval_every_steps": 0,
                                            "max_checkpoints_to_keep": 3, **changes})


def losses(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


def tree_hashes(folder):
  """{relative path: sha256} of every file under folder."""
  out = {}
  for root, _, files in os.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
  return out


def assert_same_losses(reference, got, steps):
  for step in steps:
    assert abs(reference[step] - got[step]) <= 1e-6 * max(1.0, abs(reference[step])), (
        step, reference[step], got[step])


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
  """An uninterrupted 12-step run: its per-step losses."""
  workdir = str(tmp_path_factory.mktemp("reference"))
  trainer.train_and_evaluate(small_config(corpus), workdir)
  return workdir, losses(workdir)


# ---------------------------------------------------------------- refusals change nothing
@pytest.mark.slow
@pytest.mark.parametrize("changes, message", [
    ({"model.hidden_size": 48, "model.intermediate_size": 96},
     r"holds a different model than this run's config \(hidden_size 32 -> 48"),
    ({"data.train_files": ("OTHER",)}, r"data shard 0 was saved with \d+ tokens, this input "
                                       r"has \d+: not the same corpus"),
])
def test_a_refused_rerun_leaves_the_workdir_byte_identical(corpus, reference, tmp_path,
                                                           changes, message):
  workdir = str(tmp_path / "run")
  shutil.copytree(reference[0], workdir)
  if changes.get("data.train_files") == ("OTHER",):
    other = tmp_path / "other.txt"
    with open(corpus) as f:
      other.write_text(f.read()[: 200_000])
    changes = {"data.train_files": (str(other),)}
  before = tree_hashes(workdir)
  with pytest.raises(ValueError, match=message):
    trainer.train_and_evaluate(small_config(corpus, num_train_steps=16, **changes), workdir)
  assert tree_hashes(workdir) == before


@pytest.mark.parametrize("changes, message", [
    ({"data.batch_size": 0}, r"config.data.batch_size=0: must be > 0"),
    ({"num_train_steps": 0}, r"config.num_train_steps=0: pretraining counts its length in steps"),
    ({"num_train_steps": 0, "init_from": "/nonexistent", "data.eval_held_out_docs": 0,
      "data.eval_files": ()}, r"config.num_train_steps=0 evaluates config.init_from's model, "
     r"but there is no held-out data"),
    ({"init_from": "/nonexistent"}, r"/nonexistent: no such file or folder"),
])
def test_bad_values_are_refused_before_the_workdir_exists(corpus, tmp_path, changes, message):
  workdir = tmp_path / "never"
  with pytest.raises((ValueError, FileNotFoundError), match=message):
    trainer.train_and_evaluate(small_config(corpus, **changes), str(workdir))
  assert not workdir.exists()


# ------------------------------------------------------------------------------ NaN
@pytest.mark.slow
def test_nan_stops_before_a_nan_checkpoint_and_keeps_the_good_one(corpus, reference,
                                                                 tmp_path):
  workdir = str(tmp_path / "run")
  shutil.copytree(reference[0], workdir)
  good = tree_hashes(os.path.join(workdir, "checkpoints", "12"))
  # An absurd learning rate from step 13 on: the params overflow within a step or two;
  # checkpoints every step, logs every 100, so only the per-step guard can catch it.
  config = small_config(corpus, num_train_steps=20, checkpoint_every_steps=1,
                        log_every_steps=100, **{"optim.learning_rate": 1e38,
                                                "optim.warmup_steps": 0})
  with pytest.raises(FloatingPointError, match=r"step 1[34]: .* not all finite; stopped "
                     r"before saving \(the last good checkpoint is step 1[23] in"):
    trainer.train_and_evaluate(config, workdir)
  steps = sorted(int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit())
  assert max(steps) <= 13 and 12 in steps
  assert tree_hashes(os.path.join(workdir, "checkpoints", "12")) == good
  import bert_jax
  import numpy as np
  import jax
  _, variables = bert_jax.load_pretrained(workdir)
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(variables))


# ------------------------------------------------------------------ damaged checkpoints
@pytest.fixture(scope="module")
def stopped_at_8(corpus, tmp_path_factory):
  """A run stopped after 8 of the 12 steps (checkpoints 4 and 8); each test damages a copy."""
  workdir = str(tmp_path_factory.mktemp("stopped_at_8"))
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=8), workdir)
  return workdir


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(corpus, reference, stopped_at_8,
                                                                tmp_path, damage):
  workdir = str(tmp_path / "run")
  shutil.copytree(stopped_at_8, workdir)
  state_dir = os.path.join(workdir, "checkpoints", "8", "state")
  files = [os.path.join(r, f) for r, _, fs in os.walk(state_dir) for f in fs]
  biggest = max(files, key=os.path.getsize)
  if damage == "truncate":
    with open(biggest, "r+b") as f:
      f.truncate(os.path.getsize(biggest) // 2)
  else:
    os.remove(biggest)
  trainer.train_and_evaluate(small_config(corpus), workdir)
  assert_same_losses(reference[1], losses(workdir), range(1, STEPS + 1))
  assert os.listdir(os.path.join(workdir, "damaged_checkpoints"))[0].startswith("8-")


# ------------------------------------------------------------------------------ SIGTERM
def _cmd(corpus, workdir, steps):
  flags = [f"--config.{k}={','.join(v) if isinstance(v, tuple) else v}"
           for k, v in {**OVERRIDES, "num_train_steps": steps,
                        "checkpoint_every_steps": 1000}.items()]
  return [sys.executable, "-m", "bert_jax.train",
          f"--config={REPO}/configs/tiny.py:corpus={corpus},runlocal=True",
          f"--workdir={workdir}", *flags]


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_the_rerun_resumes_exactly(corpus, tmp_path):
  steps = 60
  reference_dir, workdir = str(tmp_path / "reference"), str(tmp_path / "run")
  # The uninterrupted reference and the rerun train in this process, on the config `_cmd`
  # gives the CLI.
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=steps,
                                          checkpoint_every_steps=1000), reference_dir)
  proc = subprocess.Popen(_cmd(corpus, workdir, steps), cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(os.path.join(workdir, "metrics.jsonl")) and max(losses(workdir),
                                                                      default=0) >= 5:
      break
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  out, _ = proc.communicate(timeout=300)
  assert proc.returncode == 143, out
  stopped = [line for line in out.splitlines() if line.startswith("Stopped by SIGTERM")]
  assert stopped, out
  at = int(stopped[0].split("at step ")[1].split(";")[0])
  assert 5 <= at < steps
  assert str(at) in os.listdir(os.path.join(workdir, "checkpoints"))
  assert not os.path.exists(os.path.join(workdir, workdir_lib.LOCK))
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=steps,
                                          checkpoint_every_steps=1000), workdir)
  reference_losses, got = losses(reference_dir), losses(workdir)
  assert sorted(got) == list(range(1, steps + 1))
  assert_same_losses(reference_losses, got, range(1, steps + 1))


# --------------------------------------------------------------------------------- lock
def test_a_second_run_in_a_locked_workdir_is_refused(corpus, tmp_path):
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / workdir_lib.LOCK).write_text(json.dumps(
      {"pid": os.getpid(), "host": socket.gethostname(), "started": "earlier"}))
  before = tree_hashes(str(workdir))
  with pytest.raises(workdir_lib.WorkdirLocked, match=rf"is in use by process {os.getpid()}"):
    trainer.train_and_evaluate(small_config(corpus), str(workdir))
  assert tree_hashes(str(workdir)) == before


@pytest.mark.slow
def test_a_stale_lock_is_replaced(corpus, tmp_path, capsys):
  workdir = tmp_path / "run"
  workdir.mkdir()
  dead = subprocess.Popen([sys.executable, "-c", "pass"])
  dead.wait()
  (workdir / workdir_lib.LOCK).write_text(json.dumps(
      {"pid": dead.pid, "host": socket.gethostname(), "started": "earlier"}))
  trainer.train_and_evaluate(small_config(corpus, num_train_steps=2), str(workdir))
  assert f"removed a stale lock of process {dead.pid}" in capsys.readouterr().out
  assert not (workdir / workdir_lib.LOCK).exists()


# ------------------------------------------------------------------ finished reruns
@pytest.mark.slow
def test_rerunning_a_finished_run_reports_it_and_changes_nothing(reference):
  workdir = reference[0]
  with open(os.path.join(workdir, "eval_results.json")) as f:
    results = json.load(f)
  before = tree_hashes(workdir)
  again = trainer.train_and_evaluate(small_config_from(workdir), workdir)
  assert again == results
  assert tree_hashes(workdir) == before


def small_config_from(workdir):
  """The config the workdir's run used (its config.json), as a ConfigDict."""
  import ml_collections
  with open(os.path.join(workdir, "config.json")) as f:
    raw = json.load(f)
  raw["data"]["train_files"] = tuple(raw["data"]["train_files"])
  raw["data"]["eval_files"] = tuple(raw["data"]["eval_files"])
  return ml_collections.ConfigDict(raw)
