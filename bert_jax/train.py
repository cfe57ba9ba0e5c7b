r"""Entry point: parses flags and hands the config to the trainer.

  python -m bert_jax.train --config=configs/tiny.py --workdir=runs/tiny \
      [--config.optim.learning_rate=1e-3 ...]

Multi-host: add --coordinator_address=HOST:PORT --num_processes=N --process_id=I, or
--distributed=auto where jax.distributed.initialize() finds the cluster itself (TPU VMs).
"""
import os
import sys
import threading

from absl import app, flags

from bert_jax.startup import cli
from bert_jax.startup import config_flag

_CONFIG = config_flag.define_config("config", "The experiment config.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints, metrics and logs go here.")
_DISTRIBUTED = flags.DEFINE_enum("distributed", "off", ["off", "auto", "explicit"],
                                 "auto: jax.distributed.initialize() detects the cluster; "
                                 "explicit: use the three flags below.")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None, "HOST:PORT of process 0.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "Number of processes.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "This process's index.")
_COMPILE_ONLY = flags.DEFINE_bool(
    "compile_only", False, "Compile the train step for the configured mesh and print "
    "per-device memory and FLOPs (see bert_jax/run/compile_report.py); no training.")
_TARGET = flags.DEFINE_string(
    "target", "host", "With --compile_only: the devices to compile for, 'host' or a TPU "
    "slice / GPU node described without the hardware, e.g. tpu:v5e-16, tpu:v5p-8x2 (two "
    "slices), gpu:h100x8 (see bert_jax/run/targets.py).")
_INIT_TIMEOUT = flags.DEFINE_integer("initialization_timeout", 300,
                                     "Seconds to wait for every process to join.")
_HEARTBEAT_TIMEOUT = flags.DEFINE_integer(
    "heartbeat_timeout", 100, "Seconds without a heartbeat after which a process counts "
    "as dead; every other process then exits with an error instead of hanging.")


def _initialize_distributed(**cluster):
  """jax.distributed.initialize, with a clear error when a process does not join in time.

  On a join timeout the runtime aborts the process from C++ with a message about a task
  that died; a watchdog fires first (the runtime gets a few seconds more) and exits
  with a message that says what happened and what to check.
  """
  import jax
  timeout = _INIT_TIMEOUT.value

  def give_up():
    where = (f"process {cluster['process_id']} of {cluster['num_processes']}, coordinator "
             f"{cluster['coordinator_address']}" if cluster else "auto-detected cluster")
    print(f"bert_jax.train: not every process joined within --initialization_timeout="
          f"{timeout}s ({where}). Start all processes with the same --coordinator_address "
          "and --num_processes and distinct --process_id, and check that the coordinator "
          "port is reachable.", file=sys.stderr, flush=True)
    os._exit(3)

  watchdog = threading.Timer(timeout, give_up)
  watchdog.daemon = True
  watchdog.start()
  try:
    jax.distributed.initialize(initialization_timeout=timeout + 10,
                               heartbeat_timeout_seconds=_HEARTBEAT_TIMEOUT.value, **cluster)
  finally:
    watchdog.cancel()


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  distributed = _DISTRIBUTED.value
  if _COORDINATOR.value and distributed == "off":
    distributed = "explicit"
  if distributed == "auto":
    _initialize_distributed()
  elif distributed == "explicit":
    _initialize_distributed(coordinator_address=_COORDINATOR.value,
                            num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value)
  if _TARGET.value != "host" and not _COMPILE_ONLY.value:
    raise ValueError(f"--target={_TARGET.value} compiles without the hardware: add "
                     "--compile_only (training runs on the host's own devices)")
  if _COMPILE_ONLY.value:
    if _TARGET.value != "host":
      import jax
      jax.config.update("jax_platforms", "cpu")  # the target's compiler needs no device
    from bert_jax.run import compile_report
    report = compile_report.compile_report(_CONFIG.value, _TARGET.value)
    print(compile_report.format_report(report))
    if "out_of_memory" in report:  # the target's compiler refused it: a batch to shrink
      sys.exit(1)
    return
  from bert_jax.run import trainer  # after distributed init
  result = trainer.train_and_evaluate(_CONFIG.value, _WORKDIR.value)
  if "stopped_by" in result:  # preempted: exit as a process killed by that signal would
    signal_name = result["stopped_by"].split()[0]  # "SIGTERM (a preemption notice ...)"
    sys.exit({"SIGTERM": 128 + 15, "SIGINT": 128 + 2}.get(signal_name, 1))


if __name__ == "__main__":
  flags.mark_flags_as_required(["config", "workdir"])
  cli.run(main, urls=("workdir",))
