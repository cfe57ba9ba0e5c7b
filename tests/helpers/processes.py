"""Training runs as subprocesses on simulated CPU devices (tests/test_scale_out.py's and
tests/test_gcs_scale_out.py's multi-process jobs): start, wait, stop, compare losses."""
import ctypes
import os
import signal
import socket
import subprocess
import sys

import pytest

import scale_out_worker as worker

REPO = worker.REPO
RTOL = 1e-5  # the losses of one run against another's (float32, another mesh or process count)
WAIT_S = 420  # the most any background job may take (they share two cores)
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def _die_with_parent() -> None:
  """(In the child, before exec.) SIGKILL when pytest dies, even if it is killed -9."""
  _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Job:
  """A subprocess started now and waited for later; stdout and stderr go to `log`.

  It runs on `devices` simulated CPU devices, LLVM optimisation off: compiling is most of
  a tiny run's time and this cuts it by a quarter (the losses agree to 2e-7 either way).
  """

  def __init__(self, args: list[str], log, devices: int, env: dict | None = None):
    self.log = str(log)
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices} "
                                      "--xla_backend_optimization_level=0",
           "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    with open(self.log, "w") as out:
      self.proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=out,
                                   stderr=subprocess.STDOUT,
                                   preexec_fn=_die_with_parent if _PRCTL else None)

  def output(self) -> str:
    with open(self.log, errors="replace") as f:
      return f.read()

  def check_running(self) -> None:
    if self.proc.poll() is not None:
      pytest.fail(f"{self.log}: exited early ({self.proc.returncode})\n{self.output()[-3000:]}")

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


def max_relative_difference(got: dict, want: dict) -> float:
  """The largest |got - want| / |want| over the steps (both must have the same steps)."""
  assert sorted(got) == sorted(want), (sorted(got), sorted(want))
  return max(abs(got[step] - want[step]) / abs(want[step]) for step in want)


def train_command(corpus: str, workdir, **changes) -> list[str]:
  """`python -m bert_jax.train` on small_config(corpus, **changes), as config flags."""
  overrides = [f"--config.{key}={value}"
               for key, value in worker.small_changes(corpus, **changes).items()]
  return [sys.executable, "-m", "bert_jax.train",
          f"--config={REPO}/configs/tiny.py:corpus={corpus},runlocal=True",
          f"--workdir={workdir}", *overrides]
