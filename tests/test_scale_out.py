"""Scale-out: the same training on any mesh, across processes and after a move.

Every run trains `small_config` (tests/scale_out_worker.py: configs/tiny.py shrunk to hidden
32, seq 32, global batch 16, 20 steps) and losses are compared step by step to 1e-5
relative. Dropout stays on: jax's threefry gives an array the same random bits however it
is sharded (with jax_threefry_partitionable, the default, each device computes just its
shard's bits), so every mesh and process count draws the same dropout masks.

JAX fixes its device count at start-up, so the multi-device runs are subprocesses: two
one tests/scale_out_worker.py process trains the three 8-device meshes in turn (a process
start and a sharded compile cost more than the 20 steps), `python -m bert_jax.train` runs
the two-process job on the fourth mesh, (2,2,2), and --compile_only. The `background`
fixture starts them all at once; the 1-device runs train in this process meanwhile. Every
wait is bounded, and no subprocess outlives the module.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest

import scale_out_worker as worker
from bert_jax.run import trainer
from bert_jax.pretrain import pipeline as pretraining_data
from bert_jax.text.tokenizers import make_tokenizer
from tests.helpers.processes import (free_port, Job, max_relative_difference, RTOL,
                                     train_command, WAIT_S)

REPO = worker.REPO
# (data, fsdp, tensor) meshes on 8 devices, one worker; 2,4,1's checkpoint moves. tensor=4
# divides neither the vocab (30522) nor the 2 heads: those stay unsplit. The pair trains the
# mesh with all three axes, so each axis is split in one process and across two.
MESHES = ("2,4,1", "1,8,1", "2,1,4")
PAIR_MESH = "2,2,2"  # every axis spans the devices of both processes
ONE_DEVICE = worker.mesh_changes("1,1,1")
HEARTBEAT_S = 10  # --heartbeat_timeout of the two processes
EXIT_S = HEARTBEAT_S + 50  # the most process 0 may take to exit once process 1 is killed


def read_losses(workdir) -> dict[int, float]:
  """{step: loss} from the complete rows of WORKDIR/metrics.jsonl (it may be growing)."""
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    rows = [json.loads(line) for line in f if line.endswith("\n")]
  return {row["step"]: row["loss"] for row in rows if "loss" in row}


def kill_after_step_20(pair: list[Job], workdir, outcome: types.SimpleNamespace) -> None:
  """(A thread.) Once the pair logs step 20: SIGKILL process 1, time process 0's exit.

  Sets outcome.losses (steps 1-20), outcome.exit_seconds (None: still running after
  EXIT_S), outcome.error (why it gave up early, or None). Both processes end either way.
  """
  survivor, victim = pair
  deadline = time.time() + WAIT_S
  try:
    while len(read_losses(workdir)) < 20:
      if survivor.proc.poll() is not None or victim.proc.poll() is not None:
        outcome.error = "a process exited before step 20"
        return
      if time.time() > deadline:
        outcome.error = f"no step 20 within {WAIT_S} s"
        return
      time.sleep(0.2)
    outcome.losses = {s: loss for s, loss in read_losses(workdir).items() if s <= 20}
    victim.proc.send_signal(signal.SIGKILL)
    killed = time.time()
    try:
      survivor.proc.wait(timeout=EXIT_S)
      outcome.exit_seconds = time.time() - killed
    except subprocess.TimeoutExpired:
      pass
  finally:
    survivor.stop()
    victim.stop()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir):
  """wikitext-2 valid in the plain format, its tokens cached for every run of the module."""
  path = str(tmp_path_factory.mktemp("corpus") / "pretrain.txt")
  subprocess.run([sys.executable, "-m", "bert_jax.text.prepare",
                  "--source=wikitext-2/valid.txt", f"--output={path}"], check=True, cwd=REPO,
                 capture_output=True)
  data_config = worker.small_config(path).data
  tokenizer = make_tokenizer(data_config)
  for process_count in (1, 2):  # every run's data shards, tokenized once
    for process_index in range(process_count):
      pretraining_data.make_inputs(data_config, process_index=process_index,
                                   process_count=process_count, tokenizer=tokenizer)
  return path


@pytest.fixture(scope="module")
def background(corpus, tmp_path_factory):
  """Starts every subprocess: the 8-device meshes, the two processes, compile_only."""
  root = tmp_path_factory.mktemp("scale_out")
  shardings_job = Job([sys.executable, "tests/scale_out_worker.py", f"--corpus={corpus}",
                       f"--out={root / 'meshes'}", *(f"--mesh={m}" for m in MESHES),
                       "--shardings=base", "--shardings_mesh=1,8,1"],
                      root / "meshes.log", devices=8)
  mesh_jobs = {mesh: shardings_job for mesh in MESHES}
  # Two processes of 4 devices each, on 127.0.0.1 only. A thread kills them soon after step
  # 20 (200 steps bound them); the learning rate is constant after warmup, so their steps
  # 1-20 equal a 20-step run's.
  port = free_port()
  pair_args = train_command(corpus, root / "pair", num_train_steps=200,
                            checkpoint_every_steps=10, **worker.mesh_changes(PAIR_MESH))
  pair_args += [f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
                f"--heartbeat_timeout={HEARTBEAT_S}"]
  bind = {"JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}
  pair = [Job(pair_args + [f"--process_id={i}"], root / f"pair{i}.log", devices=4, env=bind)
          for i in range(2)]
  # BERT-Base (layers scanned: a faster compile, the same params) at fsdp=8.
  compile_only = Job([sys.executable, "-m", "bert_jax.train",
                      "--config=configs/base.py:runlocal=True", f"--workdir={root / 'base'}",
                      "--compile_only", "--config.mesh.data=1", "--config.mesh.fsdp=8",
                      "--config.model.scan_layers=True"], root / "compile_only.log", devices=8)
  pair_outcome = types.SimpleNamespace(losses=None, exit_seconds=None, error=None)
  pair_watcher = threading.Thread(target=kill_after_step_20,
                                  args=(pair, root / "pair", pair_outcome), daemon=True)
  pair_watcher.start()
  yield types.SimpleNamespace(root=root, mesh_jobs=mesh_jobs, shardings_job=shardings_job,
                              pair=pair, pair_watcher=pair_watcher, pair_outcome=pair_outcome,
                              compile_only=compile_only)
  for job in (*set(mesh_jobs.values()), *pair, compile_only):
    job.stop()
  pair_watcher.join()


@pytest.fixture(scope="module")
def one_device_losses(corpus, background, tmp_path_factory):
  """The reference: small_config on 1 device, trained in this process."""
  del background  # started first, so that its jobs run while this trains
  workdir = str(tmp_path_factory.mktemp("one_device"))
  trainer.train_and_evaluate(worker.small_config(corpus, **ONE_DEVICE), workdir)
  losses = read_losses(workdir)
  assert sorted(losses) == list(range(1, 21))
  return losses


@pytest.fixture(scope="module")
def pair_outcome(background):
  background.pair_watcher.join(WAIT_S + EXIT_S)
  outcome = background.pair_outcome
  if outcome.losses is None:
    pytest.fail(f"two processes: {outcome.error}\n{background.pair[0].output()[-3000:]}")
  return outcome


def mesh_losses(background, mesh: str) -> dict[int, float]:
  """An 8-device worker's losses on `mesh`, as soon as that run is done."""
  run = background.root / "meshes" / mesh.replace(",", "x")
  deadline = time.time() + WAIT_S
  while not os.path.exists(f"{run}.done"):
    background.mesh_jobs[mesh].check_running()
    assert time.time() < deadline, f"no {run}.done within {WAIT_S} s"
    time.sleep(0.2)
  return read_losses(run)


@pytest.mark.slow
def test_bf16_converges_like_fp32(corpus, one_device_losses, tmp_path):
  trainer.train_and_evaluate(worker.small_config(corpus, **ONE_DEVICE, **{
      "model.dtype": "bfloat16"}), str(tmp_path))
  bf16, fp32 = read_losses(str(tmp_path)), one_device_losses
  last = lambda losses: np.mean([losses[s] for s in range(16, 21)])  # noqa: E731
  print(f"mean loss of steps 16-20: fp32 {last(fp32):.4f}, bf16 {last(bf16):.4f} "
        f"(step 1: {fp32[1]:.4f})")
  assert last(fp32) < fp32[1] - 0.5  # it does learn in 20 steps
  assert abs(last(bf16) - last(fp32)) < 0.05
  assert max_relative_difference(bf16, fp32) < 0.01


@pytest.mark.slow
def test_checkpoint_from_2x4x1_continues_on_one_device(corpus, background, tmp_path):
  """The (2,4,1) run's step-10 checkpoint, restored on 1 device, gives its steps 11-20."""
  want = {step: loss for step, loss in mesh_losses(background, "2,4,1").items() if step > 10}
  workdir = tmp_path / "moved"
  shutil.copytree(background.root / "meshes" / "2x4x1", workdir)
  shutil.rmtree(workdir / "checkpoints" / "20")
  os.remove(workdir / "metrics.jsonl")
  trainer.train_and_evaluate(worker.small_config(corpus, **ONE_DEVICE), str(workdir))
  difference = max_relative_difference(read_losses(workdir), want)
  print(f"(2,4,1) step-10 checkpoint continued on 1 device: max relative loss difference "
        f"{difference:.2e}")
  assert difference <= RTOL


@pytest.mark.slow
def test_killing_one_process_stops_the_other_with_an_error(pair_outcome, background):
  assert pair_outcome.exit_seconds is not None, (
      f"process 0 still ran {EXIT_S} s after process 1 was killed")
  survivor = background.pair[0].proc
  print(f"process 0 exited {pair_outcome.exit_seconds:.1f} s after process 1 was killed "
        f"(exit code {survivor.returncode})")
  assert survivor.returncode != 0
  assert "another task died" in background.pair[0].output()  # the distributed service's


@pytest.mark.slow
def test_every_mesh_gives_the_one_device_losses(background, one_device_losses):
  differences = {mesh: max_relative_difference(mesh_losses(background, mesh),
                                               one_device_losses) for mesh in MESHES}
  print("max relative loss difference to 1 device:",
        ", ".join(f"({mesh}) {d:.2e}" for mesh, d in differences.items()))
  assert max(differences.values()) <= RTOL


@pytest.mark.slow
def test_two_processes_give_the_one_device_losses(background, pair_outcome,
                                                  one_device_losses):
  difference = max_relative_difference(pair_outcome.losses, one_device_losses)
  print(f"2 processes x 4 devices on ({PAIR_MESH}) vs 1 device: max relative loss difference "
        f"{difference:.2e}")
  assert difference <= RTOL
  # Each process read one of the 2 data shards; the checkpoint holds both positions.
  saved = background.root / "pair" / "checkpoints" / "10" / "data" / "metadata"
  position = json.loads(saved.read_text())
  assert position["num_shards"] == 2 and sorted(position["shards"]) == ["0", "1"]


@pytest.mark.slow
def test_fsdp_leaves_no_large_param_replicated(background):
  """BERT-Base on (1,8,1): every param of 256 KiB (2**16 floats) or more is split 8 ways."""
  background.shardings_job.finish()
  with open(background.root / "meshes" / "shardings.json") as f:
    params = json.load(f)
  large = [p for p in params if p["bytes"] >= 2 ** 18]
  not_split = [(p["path"], p["spec"]) for p in large if p["device_bytes"] * 8 != p["bytes"]]
  assert large and not not_split, not_split
  # What stays whole: the biases of heads, mlp and vocab axes (tensor-parallel axes), the
  # largest being the MLM output bias (30522 floats, not a multiple of 8).
  replicated = sum(p["bytes"] for p in params if p["device_bytes"] == p["bytes"])
  fraction = replicated / sum(p["bytes"] for p in params)
  print(f"fsdp=8: {fraction:.3%} of BERT-Base's param bytes stay replicated")
  assert fraction < 0.001


@pytest.mark.slow
def test_compile_only_fsdp8_holds_an_eighth_of_params_and_optimizer(background):
  background.compile_only.finish()
  line = next(line for line in background.compile_only.output().splitlines()
              if line.startswith("JSON: "))
  report = json.loads(line[len("JSON: "):])
  assert report["mesh"] == {"data": 1, "fsdp": 8, "tensor": 1}
  total = report["params_total_bytes"] + report["opt_state_total_bytes"]
  per_device = report["params_bytes_per_device"] + report["opt_state_bytes_per_device"]
  print(f"compile_only, BERT-Base at fsdp=8: params + optimizer {per_device / 2**20:.2f} MiB "
        f"per device, total / 8 = {total / 8 / 2**20:.2f} MiB")
  assert per_device <= total / 8 * 1.05


@pytest.mark.slow
def test_a_process_whose_peer_never_joins_exits_with_a_clear_error(corpus, tmp_path):
  port = free_port()
  args = train_command(corpus, tmp_path / "alone") + [
      f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2", "--process_id=0",
      "--initialization_timeout=5"]
  alone = Job(args, tmp_path / "alone.log", devices=1,
              env={"JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"})
  started = time.time()
  try:
    alone.proc.wait(timeout=60)
  except subprocess.TimeoutExpired:
    alone.stop()
    pytest.fail(f"a process without its peer still ran after 60 s\n{alone.output()[-3000:]}")
  print(f"exited {time.time() - started:.1f} s after start (exit code {alone.proc.returncode})")
  assert alone.proc.returncode == 3
  assert ("not every process joined within --initialization_timeout=5s (process 0 of 2, "
          f"coordinator 127.0.0.1:{port})") in alone.output()


@pytest.mark.slow
def test_sigterm_to_one_process_stops_both_at_one_step_with_a_checkpoint(corpus, tmp_path):
  """Preemption of a two-process run: SIGTERM to process 1 only. JAX's preemption sync
  point (no per-step barrier) makes both processes stop after the same step, both write
  their shards of that step's checkpoint, and both exit 0 saying so."""
  port = free_port()
  workdir = tmp_path / "pair"
  args = train_command(corpus, workdir, num_train_steps=200, checkpoint_every_steps=100,
                       **worker.mesh_changes("4,1,1"))
  args += [f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
           f"--heartbeat_timeout={HEARTBEAT_S}"]
  bind = {"JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}
  pair = [Job(args + [f"--process_id={i}"], tmp_path / f"term{i}.log", devices=2, env=bind)
          for i in range(2)]
  try:
    deadline = time.time() + WAIT_S
    while len(read_losses(workdir)) < 5:
      for job in pair:
        job.check_running()
      assert time.time() < deadline, f"no step 5 within {WAIT_S} s"
      time.sleep(0.2)
    pair[1].proc.send_signal(signal.SIGTERM)
    codes = [job.proc.wait(WAIT_S) for job in pair]
  finally:
    for job in pair:
      job.stop()
  stopped = [[line for line in job.output().splitlines() if line.startswith("Stopped by ")]
             for job in pair]
  print("\n".join(lines[0] for lines in stopped if lines))
  assert codes == [143, 143], (codes, pair[0].output()[-3000:])  # as if killed by SIGTERM
  assert all(len(lines) == 1 for lines in stopped), stopped
  steps = {int(lines[0].split(" at step ")[1].split(";")[0]) for lines in stopped}
  assert len(steps) == 1, stopped  # the same step on both
  step = steps.pop()
  assert 5 <= step < 200 and (workdir / "checkpoints" / str(step)).is_dir()
  assert stopped[0][0].startswith("Stopped by SIGTERM (a preemption notice")
