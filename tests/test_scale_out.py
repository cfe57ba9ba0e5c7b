"""Scale-out (issue 5): the same training on any mesh, across processes and after a move.

Every run trains `small_config` (tests/scale_out_worker.py: configs/tiny.py shrunk to hidden
32, seq 32, global batch 16, 20 steps) and losses are compared step by step to 1e-5
relative. Dropout stays on: with jax_threefry_partitionable (the default since jax 0.5) the
random bits of an array do not depend on how it is sharded, so every mesh and process
count draws the same dropout masks.

JAX fixes its device count at start-up, so the multi-device runs are subprocesses:
tests/scale_out_worker.py trains the four 8-device meshes, `python -m bert_jax.train` runs
the two-process job and --compile_only. The `background` fixture starts them all at once
and the 1-device runs train in this process meanwhile, so both cores stay busy. Every wait
is bounded, and every subprocess is killed at the end of the module if still running.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types

import numpy as np
import pytest

import scale_out_worker as worker
from bert_jax import trainer
from bert_jax.data import pretraining as pretraining_data

REPO = worker.REPO
MESHES = ("2,4,1", "8,1,1", "2,2,2", "1,8,1")  # (data, fsdp, tensor); 2,4,1's checkpoint moves
PAIR_MESH = "2,2,2"  # every axis spans both processes' devices
ONE_DEVICE = worker.mesh_changes("1,1,1")
RTOL = 1e-5
HEARTBEAT_S = 10  # --heartbeat_timeout of the two-process run
WAIT_S = 420  # the most any background job may take (they share two cores)


class Job:
  """A subprocess started now and waited for later; stdout and stderr go to `log`."""

  def __init__(self, args: list[str], log: str, devices: int, env: dict | None = None):
    self.log = str(log)
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    with open(self.log, "w") as out:
      self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)

  def output(self) -> str:
    with open(self.log, errors="replace") as f:
      return f.read()

  def finish(self, timeout: float = WAIT_S) -> None:
    """Waits for a clean exit; a failure or a timeout fails the test with the log's end."""
    try:
      self.proc.wait(timeout)
    except subprocess.TimeoutExpired:
      self.stop()
      pytest.fail(f"{self.log}: still running after {timeout} s\n{self.output()[-3000:]}")
    if self.proc.returncode:
      pytest.fail(f"{self.log}: exit code {self.proc.returncode}\n{self.output()[-3000:]}")

  def stop(self) -> None:
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def read_losses(workdir) -> dict[int, float]:
  """{step: loss} from the complete rows of WORKDIR/metrics.jsonl (it may be growing)."""
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    rows = [json.loads(line) for line in f if line.endswith("\n")]
  return {row["step"]: row["loss"] for row in rows if "loss" in row}


def max_relative_difference(got: dict, want: dict) -> float:
  assert sorted(got) == sorted(want), (sorted(got), sorted(want))
  return max(abs(got[step] - want[step]) / abs(want[step]) for step in want)


def train_command(corpus: str, workdir, **changes) -> list[str]:
  """`python -m bert_jax.train` on small_config(corpus, **changes), as config flags."""
  overrides = [f"--config.{key}={value}"
               for key, value in worker.small_changes(corpus, **changes).items()]
  return [sys.executable, "-m", "bert_jax.train",
          f"--config={REPO}/configs/tiny.py:corpus={corpus},runlocal=True",
          f"--workdir={workdir}", *overrides]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir):
  """wikitext-2 valid in the plain format, its tokens cached for every run of the module."""
  path = str(tmp_path_factory.mktemp("corpus") / "pretrain.txt")
  subprocess.run([sys.executable, "-m", "bert_jax.data.prepare",
                  "--source=wikitext-2/valid.txt", f"--output={path}"], check=True, cwd=REPO,
                 capture_output=True)
  data_config = worker.small_config(path).data
  pretraining_data.load_corpora(data_config, pretraining_data.make_tokenizer(data_config))
  return path


@pytest.fixture(scope="module")
def background(corpus, tmp_path_factory):
  """Starts every subprocess of the module: the 8-device meshes, two processes, compile_only."""
  root = tmp_path_factory.mktemp("scale_out")
  meshes = Job([sys.executable, "tests/scale_out_worker.py", f"--corpus={corpus}",
                f"--out={root / 'meshes'}", *(f"--mesh={m}" for m in MESHES),
                "--shardings=base", "--shardings_mesh=1,8,1"], root / "meshes.log", devices=8)
  # Two processes of 4 devices each, on 127.0.0.1 only; they train until one is killed
  # (the learning rate is constant after warmup, so steps 1-20 equal a 20-step run's).
  port = free_port()
  pair_args = train_command(corpus, root / "pair", num_train_steps=100_000,
                            checkpoint_every_steps=100_000, **worker.mesh_changes(PAIR_MESH))
  pair_args += [f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
                f"--heartbeat_timeout={HEARTBEAT_S}", "--initialization_timeout=300"]
  bind = {"JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}
  pair = [Job(pair_args + [f"--process_id={i}"], root / f"pair{i}.log", devices=4, env=bind)
          for i in range(2)]
  # BERT-Base (layers scanned: a faster compile, the same params) at fsdp=8.
  compile_only = Job([sys.executable, "-m", "bert_jax.train",
                      "--config=configs/base.py:runlocal=True", f"--workdir={root / 'base'}",
                      "--compile_only", "--config.mesh.data=1", "--config.mesh.fsdp=8",
                      "--config.model.scan_layers=True"], root / "compile_only.log", devices=8)
  jobs = types.SimpleNamespace(root=root, meshes=meshes, pair=pair, compile_only=compile_only)
  yield jobs
  for job in (meshes, *pair, compile_only):
    job.stop()


@pytest.fixture(scope="module")
def one_device_losses(corpus, background, tmp_path_factory):
  """Trains in this process (1 device) while the background jobs run."""
  del background  # only started first, so that the cores are busy
  workdir = str(tmp_path_factory.mktemp("one_device"))
  trainer.train_and_evaluate(worker.small_config(corpus, **ONE_DEVICE), workdir)
  return read_losses(workdir)


def mesh_losses(background, mesh: str) -> dict[int, float]:
  background.meshes.finish()
  return read_losses(background.root / "meshes" / mesh.replace(",", "x"))


def test_every_mesh_gives_the_one_device_losses(background, one_device_losses):
  assert sorted(one_device_losses) == list(range(1, 21))
  differences = {mesh: max_relative_difference(mesh_losses(background, mesh),
                                               one_device_losses) for mesh in MESHES}
  print("max relative loss difference to 1 device:", differences)
  assert max(differences.values()) <= RTOL, differences


def test_two_processes_give_the_one_process_losses(background):
  """Process 0 writes the metrics of both; its first 20 steps equal the 8-device run's."""
  want = mesh_losses(background, PAIR_MESH)
  deadline = time.time() + WAIT_S
  while len(read_losses(background.root / "pair")) < 20:
    for job in background.pair:
      if job.proc.poll() is not None:
        pytest.fail(f"{job.log}: exited early ({job.proc.returncode})\n{job.output()[-3000:]}")
    assert time.time() < deadline, "two processes: no step 20 in time"
    time.sleep(0.5)
  got = {step: loss for step, loss in read_losses(background.root / "pair").items()
         if step <= 20}
  difference = max_relative_difference(got, want)
  print(f"two processes vs one: max relative loss difference {difference:.2e}")
  assert difference <= RTOL


def test_killing_one_process_stops_the_other_with_an_error(background):
  survivor, victim = background.pair
  deadline = time.time() + WAIT_S
  while len(read_losses(background.root / "pair")) < 3:  # both are in the training loop
    assert survivor.proc.poll() is None and victim.proc.poll() is None, survivor.output()
    assert time.time() < deadline, "two processes: no step 3 in time"
    time.sleep(0.5)
  victim.proc.send_signal(signal.SIGKILL)
  killed = time.time()
  try:
    survivor.proc.wait(timeout=HEARTBEAT_S + 50)
  except subprocess.TimeoutExpired:
    pytest.fail(f"process 0 still running {HEARTBEAT_S + 50} s after process 1 was killed")
  elapsed = time.time() - killed
  print(f"process 0 exited {elapsed:.1f} s after process 1 was killed "
        f"(exit code {survivor.proc.returncode})")
  assert survivor.proc.returncode != 0
  assert "another task died" in survivor.output()  # the distributed service's message


def test_bf16_converges_like_fp32(corpus, one_device_losses, tmp_path):
  trainer.train_and_evaluate(worker.small_config(corpus, **ONE_DEVICE, **{
      "model.dtype": "bfloat16"}), str(tmp_path))
  bf16 = read_losses(str(tmp_path))
  fp32 = one_device_losses
  last = lambda losses: np.mean([losses[s] for s in range(16, 21)])  # noqa: E731
  assert last(fp32) < fp32[1] - 0.5  # it does learn in 20 steps
  assert abs(last(bf16) - last(fp32)) < 0.05, (bf16, fp32)
  assert max_relative_difference(bf16, fp32) < 0.01, (bf16, fp32)


def test_checkpoint_from_2x4x1_continues_on_one_device(corpus, background, tmp_path):
  """The (2,4,1) run's step-10 checkpoint, restored on 1 device, gives its steps 11-20."""
  unmoved = background.root / "meshes" / "2x4x1"
  mesh_losses(background, "2,4,1")  # waits for the worker
  workdir = tmp_path / "moved"
  shutil.copytree(unmoved, workdir)
  shutil.rmtree(workdir / "checkpoints" / "20")
  os.remove(workdir / "metrics.jsonl")
  trainer.train_and_evaluate(worker.small_config(corpus, **ONE_DEVICE), str(workdir))
  want = {step: loss for step, loss in read_losses(unmoved).items() if step > 10}
  difference = max_relative_difference(read_losses(workdir), want)
  print(f"moved (2,4,1) -> 1 device at step 10: max relative loss difference {difference:.2e}")
  assert difference <= RTOL


def test_fsdp_leaves_no_large_param_replicated(background):
  """BERT-Base on (1,8,1): every param of >= 2**16 elements is split 8 ways."""
  background.meshes.finish()
  with open(background.root / "meshes" / "shardings.json") as f:
    params = json.load(f)
  large = [p for p in params if p["bytes"] >= 4 * 2 ** 16]
  assert large and all(p["device_bytes"] * 8 == p["bytes"] for p in large), [
      (p["path"], p["spec"]) for p in large if p["device_bytes"] * 8 != p["bytes"]]
  replicated = sum(p["bytes"] for p in params if p["device_bytes"] == p["bytes"])
  assert replicated < 0.001 * sum(p["bytes"] for p in params)  # biases, LayerNorms


def test_compile_only_fsdp8_holds_an_eighth_of_params_and_optimizer(background):
  background.compile_only.finish()
  line = next(line for line in background.compile_only.output().splitlines()
              if line.startswith("JSON: "))
  report = json.loads(line[len("JSON: "):])
  assert report["mesh"] == {"data": 1, "fsdp": 8, "tensor": 1}
  total = report["params_total_bytes"] + report["opt_state_total_bytes"]
  per_device = report["params_bytes_per_device"] + report["opt_state_bytes_per_device"]
  print(f"compile_only fsdp=8: {per_device} bytes per device, total / 8 = {total / 8:.0f}")
  assert per_device <= total / 8 * 1.05
