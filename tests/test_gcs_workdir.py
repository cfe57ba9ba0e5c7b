"""A gs:// workdir against a real GCS JSON API server on 127.0.0.1 (tests/helpers/gcs.py:
fake-gcs-server, reached by gcsfs and tensorstore through their endpoint settings). The
tests read the bucket back over the JSON API with urllib, not through bert_jax's own path
code.

Also: a URL given to a step that reads or writes local files is one line, and no local
folder is named after it (that test needs no server).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from bert_jax.files import storage
from bert_jax.run import trainer
from bert_jax.run.workdir import WorkdirLock, WorkdirLocked
from configs import base
from tests.helpers.runs import REPO, set_fields
from tests.helpers.gcs import BUCKET, url_named_paths
# configs/base.py:runlocal=True (the docstring's command) at test_train's kill-run shapes
# (BERT-Tiny's L2/H32), a checkpoint every 8 steps: still running when the test sees step 10.
_STEPS = 32
_OVERRIDES = {"model.num_hidden_layers": 2, "model.num_attention_heads": 2,
              "model.hidden_size": 32, "model.intermediate_size": 64,
              "model.max_position_embeddings": 64, "data.max_seq_length": 32,
              "data.max_predictions_per_seq": 5, "data.cache_dir": "",
              "data.eval_held_out_docs": 4, "eval_batches": 2,  # tiny's (a 60-document corpus)
              "num_train_steps": _STEPS, "log_every_steps": 1,
              "checkpoint_every_steps": 8, "eval_every_steps": 0}


def _losses(text: str) -> dict:
  rows = [json.loads(line) for line in text.splitlines() if line.strip()]
  return {r["step"]: r["loss"] for r in rows if "loss" in r}


def _wait(run, ready, timeout_s: float = 300) -> None:
  """Polls ready() every 50 ms while the run is going."""
  deadline = time.time() + timeout_s
  while run.poll() is None and time.time() < deadline and not ready():
    time.sleep(0.05)
  assert run.poll() is None, "the run ended before the test saw what it waits for"


def _steps(gcs, prefix) -> list[int]:
  return sorted({int(name[len(prefix):].split("/")[0]) for name in gcs.names(prefix)
                 if name.endswith("/commit_success.txt") and name.count("/") == 3})


@pytest.mark.slow
def test_a_gs_workdir_run_killed_and_rerun_resumes_from_the_bucket(corpus, gcs, tmp_path,
                                                                    capsys):
  """configs/base.py's docstring command with --workdir=gs://... (runlocal, tiny shapes): its
  checkpoints, metrics.jsonl and TensorBoard events are in the bucket and no local path is
  named after the URL; a second run while it holds the lock is refused in one line; kill -9
  mid-run, and the rerun resumes from the bucket with the losses of an uninterrupted run."""
  def config():
    return set_fields(base.get_config(f"corpus={corpus},runlocal=True"), _OVERRIDES)

  reference = str(tmp_path / "reference")
  trainer.train_and_evaluate(config(), reference)
  workdir, prefix = f"gs://{BUCKET}/bert_base", "bert_base/"
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  cmd = [sys.executable, "-m", "bert_jax.train",
         f"--config={REPO}/configs/base.py:corpus={corpus},runlocal=True",
         f"--workdir={workdir}", *[f"--config.{k}={v}" for k, v in _OVERRIDES.items()]]
  run = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, "PYTHONPATH": REPO},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    _wait(run, lambda: f"{prefix}.lock" in gcs.names(prefix))
    with pytest.raises(WorkdirLocked) as refused:  # the run above holds the bucket's lock
      trainer.train_and_evaluate(config(), workdir)
    _wait(run, lambda: _steps(gcs, f"{prefix}checkpoints/") and max(
        _losses(gcs.read(f"{prefix}metrics.jsonl").decode()), default=0) >= 10)
  finally:
    run.send_signal(signal.SIGKILL)
    run.wait()
  assert f"{workdir} is in use by process {run.pid}" in str(refused.value)
  assert "\n" not in str(refused.value)
  killed_at = max(_losses(gcs.read(f"{prefix}metrics.jsonl").decode()))
  assert 10 <= killed_at < _STEPS, killed_at

  capsys.readouterr()
  trainer.train_and_evaluate(config(), workdir)
  resumed = re.search(f"Resumed from {workdir}/checkpoints at step ([0-9]+)",
                      capsys.readouterr().out)
  assert resumed and 8 <= int(resumed[1]) <= killed_at, killed_at
  with open(os.path.join(reference, "metrics.jsonl")) as f:
    ref = _losses(f.read())
  got = _losses(gcs.read(f"{prefix}metrics.jsonl").decode())
  assert sorted(got) == list(range(1, _STEPS + 1))
  for step in ref:
    assert abs(ref[step] - got[step]) <= 1e-6 * max(1.0, abs(ref[step])), step

  names = gcs.names(prefix)
  assert _steps(gcs, f"{prefix}checkpoints/") == [16, 24, 32]  # keep-3
  for name in ("config.json", "model_config.json", "vocab.txt", "eval_results.json",
               "run_report.json"):
    assert prefix + name in names, name
  assert f"{prefix}.lock" not in names  # released
  events = [n for n in names if n.startswith(f"{prefix}tensorboard/events.out.tfevents.")]
  assert len(events) == 2  # one per invocation, TensorBoard's record format
  import tensorflow as tf
  local = tmp_path / "events"
  local.write_bytes(gcs.read(events[-1]))
  logged = {(e.step, v.tag) for e in tf.compat.v1.train.summary_iterator(str(local))
            for v in e.summary.value}
  assert (_STEPS, "loss") in logged and (9, "loss") in logged
  assert url_named_paths(tmp_path, REPO) == []
  assert [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(("gs:", "s3:"))] == []


def test_the_lock_on_a_bucket_is_created_once(gcs):
  """WORKDIR/.lock on GCS is created with ifGenerationMatch=0: of 8 threads creating it at
  once exactly one succeeds, and a second run on a locked bucket workdir is refused in one
  line (the lock is gone once the first run ends)."""
  path = f"gs://{BUCKET}/race/.lock"
  wins = []
  threads = [threading.Thread(target=lambda i=i: wins.append(
      storage.create_exclusive(path, str(i)))) for i in range(8)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  assert sorted(wins) == [False] * 7 + [True]
  workdir = f"gs://{BUCKET}/locked"
  with WorkdirLock(workdir):
    assert gcs.names("locked/") == ["locked/.lock"]
    with pytest.raises(WorkdirLocked) as refused:
      with WorkdirLock(workdir):
        pass
    assert str(refused.value).startswith(f"{workdir} is in use by process {os.getpid()}")
    assert "\n" not in str(refused.value)
  assert gcs.names("locked/") == []


def test_a_url_a_step_cannot_use_is_one_line_and_no_folder(tmp_path):
  """A URL for a local-only path (absl's --log_dir, where its log files go) is refused up
  front, in one line naming it and the program, and no local folder is named after it."""
  args = ["bert_jax.train", f"--config={REPO}/configs/tiny.py:runlocal=True",
          "--log_dir=gs://bucket/logs", "--workdir=run"]
  result = subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": REPO}, timeout=300)
  assert result.returncode == 1, result.stderr
  lines = result.stderr.strip().splitlines()
  assert lines == ["bert_jax.train: error: --log_dir=gs://bucket/logs: bert_jax.train reads "
                   "and writes local paths there, a URL is not supported (copy the files to "
                   "a local folder)"], result.stderr
  assert os.listdir(tmp_path) == []  # not even the local workdir
  assert url_named_paths(tmp_path) == []


@pytest.mark.slow
def test_a_bucket_lost_mid_save_stops_in_one_line_and_the_rerun_resumes(corpus, tmp_path):
  """The server stopped while the run writes a checkpoint: the run exits (within the
  bounded retries, not the clients' quarter of an hour) with a last line naming the last
  whole checkpoint; with the server back on the same storage folder, the same command
  resumes (from that checkpoint or a newer whole one) and finishes."""
  from tests.helpers.gcs import GcsServer
  server = GcsServer(str(tmp_path / "store"))
  env = {**os.environ, "PYTHONPATH": REPO, "STORAGE_EMULATOR_HOST": server.url,
         "TENSORSTORE_GCS_HTTP_URL": server.url, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
         "PYTHONFAULTHANDLER": "1"}
  server.start()
  server.request("/storage/v1/b?project=test", json.dumps({"name": BUCKET}).encode())
  workdir, prefix = f"gs://{BUCKET}/lost", "lost/checkpoints/"
  cmd = [sys.executable, "-m", "bert_jax.train",
         f"--config={REPO}/configs/tiny.py:corpus={corpus},runlocal=True",
         f"--workdir={workdir}", *[f"--config.{k}={v}" for k, v in _OVERRIDES.items()]]
  run = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
  try:
    def saving_after_a_whole_one():  # step 8 whole, a later step's files appearing
      names = server.names(prefix)
      started = {n[len(prefix):].split("/")[0] for n in names}
      whole = {n[len(prefix):].split("/")[0] for n in names if n.endswith("/commit_success.txt")
               and n.count("/") == 3}
      return "8" in whole and started - whole - {"8"}
    _wait(run, saving_after_a_whole_one)
    server.stop()
    stopped = time.time()
    try:
      _, stderr = run.communicate(timeout=240)
    except subprocess.TimeoutExpired:
      run.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack
      pytest.fail(f"still running 240 s after the server stopped:\n"
                  f"{run.communicate()[1][-6000:]}")
  finally:
    if run.poll() is None:
      run.kill()
      run.wait()
  took = time.time() - stopped
  assert run.returncode == 1, stderr[-3000:]
  last = stderr.strip().splitlines()[-1]
  named = re.search(f"the last whole checkpoint is step ([0-9]+) in {workdir}/checkpoints",
                    last)
  assert last.startswith("bert_jax.train: error: the run stopped: writing to storage "
                         "failed") and named, stderr[-3000:]
  print(f"exited {took:.0f} s after the server stopped")
  assert took < 150, took  # GCS_RETRIES bound tensorstore's retries

  server.start()  # the same folder: what the bucket held
  try:
    assert f"{prefix}{named[1]}/commit_success.txt" in server.names(prefix)
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # From that one, or a newer one the lost run had finished without knowing it.
    resumed = re.search(f"Resumed from {workdir}/checkpoints at step ([0-9]+)", done.stdout)
    assert resumed and int(resumed[1]) >= int(named[1]), done.stdout
    assert f"{prefix}{_STEPS}/commit_success.txt" in server.names(prefix)
  finally:
    server.stop()
