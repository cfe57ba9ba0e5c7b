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
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from bert_jax.models.config import BertConfig
from bert_jax.models.layout import unstack_layers

MODEL_CONFIG = "model_config.json"


def is_native(path: str) -> bool:
  return os.path.isdir(path) and os.path.exists(os.path.join(path, MODEL_CONFIG))


def write_model_config(directory: str, config: BertConfig, **extra) -> None:
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, MODEL_CONFIG), "w") as f:
    json.dump({**config.to_json_dict(), **extra}, f, indent=2)


def read_model_config(directory: str) -> BertConfig:
  return BertConfig.from_json_file(os.path.join(directory, MODEL_CONFIG))


def save_model(directory: str, config: BertConfig, params, vocab_path: str | None = None):
  """Writes a saved model (see module docstring); `params` as the model uses them."""
  directory = os.path.abspath(directory)
  write_model_config(directory, config)
  target = os.path.join(directory, "params")
  if os.path.exists(target):
    shutil.rmtree(target)
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(target, params)
  checkpointer.wait_until_finished()
  if vocab_path:
    shutil.copyfile(vocab_path, os.path.join(directory, "vocab.txt"))


def load_model_params(path: str) -> tuple[BertConfig, dict]:
  """(config, unrolled params as numpy) from a saved model or the latest step of a workdir."""
  path = os.path.abspath(path)
  config = read_model_config(path)
  checkpoints = os.path.join(path, "checkpoints")
  if os.path.isdir(checkpoints):
    with ocp.CheckpointManager(checkpoints) as manager:
      step = manager.latest_step()
      if step is None:
        raise FileNotFoundError(f"{checkpoints}: no finished checkpoint")
      restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
    params = restored["state"]["params"]
  else:
    target = os.path.join(path, "params")
    if not os.path.isdir(target):
      raise FileNotFoundError(f"{path}: no params/ folder and no checkpoints/ folder")
    params = ocp.StandardCheckpointer().restore(target)
  if config.scan_layers:
    params = unstack_layers(params, config.num_hidden_layers)
  return config, params


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
  """

  def __init__(self, workdir: str, max_to_keep: int = 3):
    self.directory = os.path.join(os.path.abspath(workdir), "checkpoints")
    self.manager = ocp.CheckpointManager(
        self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                                             create=True))

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def save(self, step: int, state, data_position: dict) -> None:
    """data_position: this process's input `state()`; merged over processes here."""
    self.manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state),
        data=ocp.args.JsonSave(merge_over_processes(data_position))))

  def restore(self, step: int, abstract_state):
    """abstract_state: ShapeDtypeStructs with shardings (restores onto any mesh)."""
    restored = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore()))
    return restored["state"], restored["data"]

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def close(self) -> None:
    self.manager.close()
