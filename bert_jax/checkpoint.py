"""bert_jax checkpoints (orbax).

Two layouts, both recognised by `load_pretrained`:
  saved model (`python -m bert_jax.convert` output):
      DIR/model_config.json   BertConfig fields
      DIR/params/             orbax pytree of the model params
      DIR/vocab.txt           (optional) the vocabulary the model was trained with
  training workdir (the trainer's):
      WORKDIR/model_config.json
      WORKDIR/checkpoints/<step>/state   orbax: {"step", "params", "opt_state"}
      WORKDIR/checkpoints/<step>/data    JSON: the input pipeline position
"""
import json
import os
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from bert_jax import storage
from bert_jax.models.config import BertConfig
from bert_jax.models.layout import stacked_layout, unstack_layers

MODEL_CONFIG = "model_config.json"
# tensorstore (orbax's array writer) retries a failed GCS request 32 times, backing off to
# 32 s between tries: an unreachable bucket held a save, and so the process's exit (orbax's
# save thread waits on it), for about 15 minutes. Bounded here to about 45 s in all.
GCS_RETRIES = {"max_retries": 6, "initial_delay": "1s", "max_delay": "16s"}


def _bound_tensorstore_retries() -> None:
  """GCS_RETRIES in the tensorstore contexts orbax builds its reads and writes with."""
  from orbax.checkpoint._src.serialization import tensorstore_utils
  for context in (tensorstore_utils._BASE_TS_CONTEXT,  # pylint: disable=protected-access
                  tensorstore_utils._DEFAULT_OCDBT_TS_CONTEXT):  # pylint: disable=protected-access
    context.setdefault("gcs_request_retries", dict(GCS_RETRIES))


_bound_tensorstore_retries()


def is_native(path: str) -> bool:
  return storage.isdir(path) and storage.exists(storage.join(path, MODEL_CONFIG))


def write_model_config(directory: str, config: BertConfig, **extra) -> None:
  storage.makedirs(directory)
  storage.write_text(storage.join(directory, MODEL_CONFIG),
                     json.dumps({**config.to_json_dict(), **extra}, indent=2))


def read_model_config(directory: str) -> BertConfig:
  return BertConfig.from_json_dict(read_model_record(directory),
                                   source=storage.join(directory, MODEL_CONFIG))


def read_model_record(directory: str) -> dict:
  """model_config.json as recorded: the BertConfig fields, and where written, "model" (the
  task model's spec) and "labels"."""
  path = storage.join(directory, MODEL_CONFIG)
  try:
    return json.loads(storage.read_text(path))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None


def check_weights(path: str) -> None:
  """A saved model's params/ or a workdir's checkpoints/ must be there (FileNotFoundError
  naming the folder); their contents are checked as they are read."""
  if not any(storage.isdir(storage.join(path, name)) for name in ("params", "checkpoints")):
    raise FileNotFoundError(f"{path}: no params/ folder and no checkpoints/ folder")


def read_labels(directory: str) -> list[str] | None:
  """The class names a fine-tuned workdir / saved model recorded (None: none recorded)."""
  return json.loads(storage.read_text(storage.join(directory, MODEL_CONFIG))).get("labels")


def save_model(directory: str, config: BertConfig, params, vocab_path: str | None = None,
               spec: dict | None = None, labels: list[str] | None = None):
  """Writes a saved model (see module docstring); `params` as the model uses them; `spec`,
  the task model (task_models.build's), and `labels`, its classes, are recorded in
  model_config.json as a workdir's."""
  directory = storage.absolute(directory)
  write_model_config(directory, config, **({"model": spec} if spec else {}),
                     **({"labels": list(labels)} if labels else {}))
  target = storage.join(directory, "params")
  if storage.exists(target):
    storage.remove_tree(target)
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(target, params)
  checkpointer.wait_until_finished()
  if vocab_path:
    storage.copy(vocab_path, storage.join(directory, "vocab.txt"))


def load_model_params(path: str, config: BertConfig | None = None) -> tuple[BertConfig, dict]:
  """(config, unrolled params as numpy) from a saved model or the latest step of a workdir;
  `config`: its model_config.json when already read. A damaged checkpoint is a ValueError
  naming its folder."""
  path = storage.absolute(path)
  config = config or read_model_config(path)
  checkpoints = storage.join(path, "checkpoints")
  if storage.isdir(checkpoints):
    with ocp.CheckpointManager(checkpoints) as manager:
      step = manager.latest_step()
      if step is None:
        raise FileNotFoundError(f"{checkpoints}: no finished checkpoint")
      target = storage.join(checkpoints, str(step))
      params = _readable(target, lambda: manager.restore(
          step, args=ocp.args.Composite(state=ocp.args.StandardRestore())))["state"]["params"]
  else:
    target = storage.join(path, "params")
    if not storage.isdir(target):
      raise FileNotFoundError(f"{path}: no params/ folder and no checkpoints/ folder")
    params = _readable(target, lambda: ocp.StandardCheckpointer().restore(target))
  if config.scan_layers:
    params = unstack_layers(params, *stacked_layout(config))
  return config, params


def _readable(target: str, restore):
  """restore(), with a damaged or cut-short checkpoint as one line naming its folder."""
  try:
    return restore()
  except (OSError, ValueError, RuntimeError, KeyError) as error:
    raise ValueError(f"{target}: not a readable checkpoint ({_first_line(error)}); it is "
                     "damaged or incomplete: save or copy it again") from None


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
        print(f"checkpoint {step} in {self.directory} is damaged ({_first_line(error)}); "
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


def _first_line(error: BaseException) -> str:
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__
