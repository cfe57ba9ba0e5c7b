"""bert_jax checkpoints (orbax).

Two layouts, both recognised by `load_pretrained`:
  saved model (`python -m bert_jax.commands.convert` output):
      DIR/model_config.json   BertConfig fields
      DIR/params/             orbax pytree of the model params
      DIR/vocab.txt           (optional) the vocabulary the model was trained with
  training workdir (the trainer's):
      WORKDIR/model_config.json
      WORKDIR/checkpoints/<step>/state   orbax: {"step", "params", "opt_state"}
      WORKDIR/checkpoints/<step>/data    JSON: the input pipeline position

This module reads and writes the model's side (model_config.json, params/, a workdir's
latest params); the trainer's checkpoints, saved and resumed, are bert_jax/run/checkpoints.py.
"""
import json

import orbax.checkpoint as ocp

from bert_jax.files import storage
from bert_jax.models import specs
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
  headed model's spec, an old "task_model" key read as "headed_model") and "labels"."""
  path = storage.join(directory, MODEL_CONFIG)
  try:
    record = json.loads(storage.read_text(path))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None
  if "model" in record:
    record["model"] = specs.recorded_spec(record["model"])
  return record


def check_weights(path: str) -> None:
  """A saved model's params/ or a workdir's checkpoints/ must be there (FileNotFoundError
  naming the folder); their contents are checked as they are read."""
  if not any(storage.isdir(storage.join(path, name)) for name in ("params", "checkpoints")):
    raise FileNotFoundError(f"{path}: no params/ folder and no checkpoints/ folder")


def save_model(directory: str, config: BertConfig, params, vocab_path: str | None = None,
               spec: dict | None = None, labels: list[str] | None = None):
  """Writes a saved model (see module docstring); `params` as the model uses them; `spec`,
  the headed model (specs.build's), and `labels`, its classes, are recorded in
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
    raise ValueError(f"{target}: not a readable checkpoint ({first_line(error)}); it is "
                     "damaged or incomplete: save or copy it again") from None


def first_line(error: BaseException) -> str:
  """An exception as one short line: its type and the first line of its message."""
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__
