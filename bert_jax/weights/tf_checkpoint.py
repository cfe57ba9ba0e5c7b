"""Google TF1 BERT checkpoints (bert_config.json + bert_model.ckpt.*) -> HF names (which
hf.state_to_params maps to ours, as the loader does).

The checkpoint is read with TensorFlow's checkpoint reader (no pickle). Optimizer slots
(`adam_m`, `adam_v`) and bookkeeping variables (`global_step`, ...) are skipped; every
other variable must map onto the model or it is reported as unknown.
"""
import glob
import os

import numpy as np

from bert_jax.models.config import BertConfig

_SKIPPED_SUFFIXES = ("/adam_m", "/adam_v")
_SKIPPED_NAMES = ("global_step", "bad_steps", "good_steps", "loss_scale")
_SPECIAL = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",  # [2, H] as HF
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}


def locate(path: str) -> tuple[str, str] | None:
  """(checkpoint prefix, bert_config.json path) of the TF checkpoint at `path` (its folder,
  whose first *.ckpt*.index it takes, or its prefix); None where `path` holds none. A
  checkpoint without bert_config.json beside it is a FileNotFoundError naming the folder."""
  if os.path.isdir(path):
    indexes = sorted(glob.glob(os.path.join(path, "*.ckpt*.index")))
    if not indexes:
      return None
    prefix, folder = indexes[0][:-len(".index")], path
  elif os.path.exists(path + ".index"):
    prefix, folder = path, os.path.dirname(path)
  else:
    return None
  config_path = os.path.join(folder, "bert_config.json")
  if not os.path.exists(config_path):
    raise FileNotFoundError(f"{folder}: no bert_config.json beside the TF checkpoint")
  return prefix, config_path


def read_config(config_path: str) -> BertConfig:
  """The checkpoint's bert_config.json (`locate`'s second path)."""
  return BertConfig.from_json_file(config_path)


def tf_name_to_hf(name: str) -> tuple[str, bool]:
  """TF variable name -> (HF name, whether the value is a kernel to transpose)."""
  if name in _SPECIAL:
    return _SPECIAL[name], False
  parts = name.split("/")
  if parts[-1].endswith("_embeddings"):  # bert/embeddings/word_embeddings is the table itself
    parts.append("weight")
  transpose = parts[-1] == "kernel"
  leaf = {"kernel": "weight", "gamma": "weight", "beta": "bias"}.get(parts[-1], parts[-1])
  parts = [p.replace("layer_", "layer.") if p.startswith("layer_") else p for p in parts[:-1]]
  return ".".join(parts + [leaf]), transpose


def read_state(prefix: str) -> tuple[dict[str, np.ndarray], int]:
  """HF-named tensors of the checkpoint, and how many optimizer/bookkeeping vars were skipped."""
  import tensorflow as tf  # heavy; only this format needs it
  reader = tf.train.load_checkpoint(prefix)
  state, skipped = {}, 0
  for name in sorted(reader.get_variable_to_shape_map()):
    if name.endswith(_SKIPPED_SUFFIXES) or name in _SKIPPED_NAMES:
      skipped += 1
      continue
    hf_name, transpose = tf_name_to_hf(name)
    value = np.asarray(reader.get_tensor(name))
    state[hf_name] = value.T if transpose else value
  return state, skipped


def read_tensors(prefix: str) -> dict[str, np.ndarray]:
  """The checkpoint's tensors by their HF names (`read_state`); a damaged checkpoint is a
  ValueError naming it."""
  import tensorflow as tf  # heavy; only this format needs it
  try:
    return read_state(prefix)[0]
  except (tf.errors.OpError, OSError, ValueError, IndexError) as error:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    raise ValueError(f"{prefix}: not a readable TF checkpoint ({first}); it is damaged or "
                     "incomplete") from None
