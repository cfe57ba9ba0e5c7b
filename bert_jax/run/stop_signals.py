"""Stopping a training run cleanly on SIGTERM (preemption) or Ctrl-C, on every process alike.

  with StopSignals() as stop:
    ...
    if stop.agreed():   # after a step: checkpoint, then return
"""
import signal
import threading

import jax
import numpy as np
from jax.experimental import multihost_utils


class StopSignals:
  """SIGTERM / SIGINT ask the loop to stop after the current step (checkpoint first).

  `requested` is the signal's name once one came. A second Ctrl-C interrupts at once.
  Handlers are installed only in the main thread (signals go nowhere else).
  """

  def __init__(self):
    self.requested = None
    self._previous = {}

  def _handle(self, signum, frame):
    del frame
    self.requested = signal.Signals(signum).name
    signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))  # a second one kills
    print(f"{self.requested}: stopping after this step (a checkpoint is written first)",
          flush=True)

  def __enter__(self) -> "StopSignals":
    if threading.current_thread() is threading.main_thread():
      for signum in (signal.SIGTERM, signal.SIGINT):
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc) -> None:
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)

  def agreed(self) -> bool:
    """Whether to stop now: every process stops at the same step if any process was asked."""
    asked = self.requested is not None
    if jax.process_count() == 1:
      return asked
    return bool(multihost_utils.process_allgather(np.array([asked], np.int32)).max())
