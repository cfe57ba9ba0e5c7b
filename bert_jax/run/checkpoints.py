"""WORKDIR/checkpoints: the trainer's train state and input position, saved together.

The model folder format the loader reads (model_config.json, params/, a workdir's latest
params) is bert_jax/weights/checkpoint.py; this module is the trainer's side: saving,
keep-N, resuming, and setting a damaged checkpoint aside.
"""
import json
import os
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from bert_jax.files import storage
from bert_jax.weights.checkpoint import first_line


def merge_over_processes(data_position: dict) -> dict:
  """Every process's input position as one JSON object (collective; all processes call it).

  Pretraining inputs keep one position per data shard under "shards", held by the process
  that reads the shard: those are united. Every other field must agree over processes.
  """
  if jax.process_count() == 1:
    return data_position
  encoded = np.frombuffer(json.dumps(data_position, sort_keys=True).encode(), np.uint8)
  lengths = multihost_utils.process_allgather(np.array([encoded.size], np.int64)).reshape(-1)
  padded = np.zeros([int(lengths.max())], np.uint8)
  padded[:encoded.size] = encoded
  rows = multihost_utils.process_allgather(padded)
  positions = [json.loads(bytes(row[:n]).decode()) for row, n in zip(rows, lengths)]
  merged = dict(positions[0])
  for index, position in enumerate(positions):
    others = {k: v for k, v in position.items() if k != "shards"}
    if others != {k: v for k, v in merged.items() if k != "shards"}:
      raise ValueError(f"process {index}'s input position {others} differs from process 0's")
    if "shards" in position:
      merged["shards"] = {**merged["shards"], **position["shards"]}
  return merged


class TrainCheckpoints:
  """WORKDIR/checkpoints: the train state AND the input position, saved together.

  Saving is collective (every process calls it; orbax writes each process's shards).
  A save is atomic (orbax writes a temporary folder and renames it), and keep-N deletes an
  old checkpoint only after the new one is complete.
  """

  def __init__(self, workdir: str, max_to_keep: int = 3):
    self.directory = storage.join(storage.absolute(workdir), "checkpoints")
    self._max_to_keep = max_to_keep
    self._manager = None
    self.whole = None  # the newest step known written whole (restored, or saved and waited)
    self._pending = None  # the step whose asynchronous save may still be running
    self._saved = False

  @property
  def manager(self) -> ocp.CheckpointManager:
    """Made on first use, so that a run refused before saving creates no folder."""
    if self._manager is None:
      self._manager = ocp.CheckpointManager(
          self.directory, options=ocp.CheckpointManagerOptions(
              max_to_keep=self._max_to_keep, create=True))
    return self._manager

  @property
  def saving(self) -> bool:
    """A save was started (an error from here on may have cut one short)."""
    return self._saved

  def save(self, step: int, state, data_position: dict) -> None:
    """data_position: this process's input `state()`; merged over processes here."""
    self._saved = True
    self.manager.save(step, args=ocp.args.Composite(  # waits for the save before it
        state=ocp.args.StandardSave(state),
        data=ocp.args.JsonSave(merge_over_processes(data_position))))
    self.whole, self._pending = self._pending if self._pending is not None else self.whole, step

  def restore(self, step: int, abstract_state):
    """abstract_state: ShapeDtypeStructs with shardings (restores onto any mesh)."""
    restored = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore()))
    return restored["state"], restored["data"]

  def restore_latest_intact(self, abstract_state, check_data=None):
    """(step, state, data position) of the newest checkpoint that restores, or None.

    A damaged checkpoint (a missing or truncated file; `check_data` raising on its data
    position is NOT damage and propagates) is reported in one line and moved to
    WORKDIR/damaged_checkpoints/<step> (kept, not deleted), and the next older one is
    tried. Raises if checkpoints exist but none is intact.
    """
    if not storage.isdir(self.directory):
      return None
    steps = sorted(self.manager.all_steps(), reverse=True)
    damaged = []
    for step in steps:
      try:
        state, data = self.restore(step, abstract_state)
        jax.block_until_ready(state)
      except Exception as error:  # orbax/TensorStore raise many kinds for a bad file
        damaged.append(step)
        print(f"checkpoint {step} in {self.directory} is damaged ({first_line(error)}); "
              "trying the one before", flush=True)
        continue
      if check_data is not None:
        check_data(data)
      self._set_aside(damaged)
      self.whole = step
      return step, state, data
    if steps:
      raise ValueError(f"{self.directory}: no intact checkpoint among steps {steps} (see "
                       "the lines above); move them away to start again")
    return None

  def _set_aside(self, steps) -> None:
    if not steps or jax.process_index() != 0:
      return
    aside = storage.join(os.path.dirname(self.directory), "damaged_checkpoints")
    storage.makedirs(aside)
    for step in steps:
      target = storage.join(aside, f"{step}-{int(time.time())}")
      storage.move(storage.join(self.directory, str(step)), target)
      print(f"moved damaged checkpoint {step} to {target}", flush=True)
    self.manager.reload()

  def wait(self) -> None:
    if self._manager is not None:
      self._manager.wait_until_finished()
      if self._pending is not None:
        self.whole, self._pending = self._pending, None

  def lost(self, error: OSError) -> OSError:
    """The error of a run whose storage failed (a bucket out of reach), as one line naming
    the newest whole checkpoint, which a rerun resumes from."""
    kept = (f"the last whole checkpoint is step {self.whole} in {self.directory}"
            if self.whole is not None else f"no whole checkpoint in {self.directory}")
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return OSError(f"the run stopped: writing to storage failed ({first}); {kept}: run the "
                   "same command to resume once it is reachable")

  def close(self) -> None:
    if self._manager is not None:
      self._manager.close()
