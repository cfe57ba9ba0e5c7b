"""Google TF1 BERT checkpoints (bert_config.json + bert_model.ckpt.*) -> HF names -> ours.

The checkpoint is read with TensorFlow's checkpoint reader (no pickle). Optimizer slots
(`adam_m`, `adam_v`) and bookkeeping variables (`global_step`, ...) are skipped; every
other variable must map onto the model or it is reported as unknown.
"""
import glob
import os

import numpy as np

from bert_jax.convert import hf
from bert_jax.models.config import BertConfig

_SKIPPED_SUFFIXES = ("/adam_m", "/adam_v")
_SKIPPED_NAMES = ("global_step", "bad_steps", "good_steps", "loss_scale")
_SPECIAL = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",  # [2, H] as HF
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}


def find_checkpoint(path: str) -> tuple[str, str]:
  """A folder or a checkpoint prefix -> (checkpoint prefix, bert_config.json path)."""
  if os.path.isdir(path):
    indexes = sorted(glob.glob(os.path.join(path, "*.ckpt*.index")))
    if not indexes:
      raise FileNotFoundError(f"{path}: no TF checkpoint (*.ckpt*.index) in this folder")
    prefix, folder = indexes[0][:-len(".index")], path
  else:
    prefix, folder = path, os.path.dirname(path)
    if not os.path.exists(prefix + ".index"):
      raise FileNotFoundError(f"{prefix}.index: TF checkpoint not found")
  config_path = os.path.join(folder, "bert_config.json")
  if not os.path.exists(config_path):
    raise FileNotFoundError(f"{folder}: no bert_config.json beside the TF checkpoint")
  return prefix, config_path


def is_tf_checkpoint(path: str) -> bool:
  if os.path.isdir(path):
    return bool(glob.glob(os.path.join(path, "*.ckpt*.index")))
  return os.path.exists(path + ".index")


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


def load(path: str, heads: str = "auto"):
  """TF checkpoint folder/prefix -> (BertConfig, params, has_pretraining_heads)."""
  config = read_config(path)
  return (config, *load_params(path, config, heads))


def read_config(path: str) -> BertConfig:
  """The bert_config.json beside the checkpoint at `path` (a folder or a prefix)."""
  return BertConfig.from_json_file(find_checkpoint(path)[1])


def load_params(path: str, config: BertConfig, heads: str = "auto") -> tuple[dict, bool]:
  """(params, has_pretraining_heads) of the checkpoint, for its config already read. A
  damaged checkpoint is a ValueError naming it."""
  prefix, _ = find_checkpoint(path)
  import tensorflow as tf  # heavy; only this format needs it
  try:
    state, _ = read_state(prefix)
  except (tf.errors.OpError, OSError, ValueError, IndexError) as error:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    raise ValueError(f"{prefix}: not a readable TF checkpoint ({first}); it is damaged or "
                     "incomplete") from None
  return hf.state_to_params(state, config, prefix, heads)
