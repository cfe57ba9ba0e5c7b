"""Stopping a training run cleanly on SIGTERM (preemption) or Ctrl-C, on every process alike.

  with StopSignals() as stop:
    ...
    if stop.agreed(step):   # after a step: checkpoint, then return

One process decides alone. Several processes (`jax.distributed`) must stop at the same step
without paying for that decision at every step: a per-step `process_allgather` is a
device-to-host round trip and a barrier across hosts, which stalls JAX's asynchronous
dispatch. They use JAX's preemption sync point instead (the coordination service's
PreemptionSyncManager, as orbax and MaxText do): its notifier catches SIGTERM in C++ and
tells every process; the processes agree in the background on the step after the largest
one any of them has reached, and `reached_sync_point(step)` is a local look-up until then.
So in a multi-process run SIGTERM is left to that notifier (a Python handler would take it
away), and a Ctrl-C is handed on to it as a SIGTERM to this process. With the preemption
service off (`JAX_ENABLE_PREEMPTION_SERVICE=false`), the per-step allgather decides.
"""
import os
import signal
import threading

import jax
import numpy as np
from jax.experimental import multihost_utils

# The stop decision among processes: "sync_point" (JAX's preemption sync point, where the
# service is on) or "allgather" (every step). bench/stop_decision.py times both.
DECISIONS = ("sync_point", "allgather")
# What stopped a process that was not signalled itself (JAX's notifier catches SIGTERM in
# C++, so under "sync_point" a SIGTERM to this very process is not seen here either).
BY_OTHER = {"sync_point": "SIGTERM (a preemption notice to one of the processes)",
            "allgather": "a signal to another process"}


def _sync_manager():
  """JAX's preemption sync manager of this multi-process run, or None."""
  from jax._src import distributed  # the manager has no public accessor
  return distributed.global_state.preemption_sync_manager


class StopSignals:
  """SIGTERM / SIGINT ask the loop to stop after the current step (checkpoint first).

  `requested` is the signal's name once one came to this process. A second Ctrl-C
  interrupts at once. Handlers are installed only in the main thread (signals go nowhere
  else). `decision`: None picks "sync_point" where JAX's preemption service runs, else
  "allgather"; one process needs neither.
  """

  def __init__(self, decision: str | None = None):
    if decision not in (None, *DECISIONS):
      raise ValueError(f"stop decision {decision!r} is not one of {DECISIONS}")
    self.requested = None
    self._decision = decision
    self._previous = {}

  def _handle(self, signum, frame):
    del frame
    self.requested = signal.Signals(signum).name
    signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))  # a second one kills
    print(f"{self.requested}: stopping after this step (a checkpoint is written first)",
          flush=True)
    if self._decision == "sync_point":  # tell every process, through JAX's notifier
      os.kill(os.getpid(), signal.SIGTERM)

  def __enter__(self) -> "StopSignals":
    if jax.process_count() > 1 and self._decision is None:
      self._decision = "sync_point" if _sync_manager() is not None else "allgather"
    if threading.current_thread() is threading.main_thread():
      mine = (signal.SIGINT,) if self._decision == "sync_point" else (signal.SIGTERM,
                                                                       signal.SIGINT)
      for signum in mine:
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)

  def agreed(self, step: int) -> bool:
    """Whether to stop after `step`: every process stops at the same step if any was asked.

    Call it after every step, from the same first step on every process.
    """
    asked = self.requested is not None
    if jax.process_count() == 1:
      return asked
    if self._decision == "sync_point":
      stop = multihost_utils.reached_preemption_sync_point(step)
    else:
      stop = bool(multihost_utils.process_allgather(np.array([asked], np.int32)).max())
    if stop and not asked:
      self.requested = BY_OTHER[self._decision]
    return stop
