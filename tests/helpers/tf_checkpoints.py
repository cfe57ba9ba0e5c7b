"""Google-format TF1 BERT checkpoints written from an HF-named state, for the readers' tests."""
import json
import os
import re

import numpy as np

from bert_jax.weights import tf_checkpoint


def hf_to_tf_name(name):
  """(Google's TF variable name of an HF BERT tensor name, whether the value transposes)."""
  special = {v: k for k, v in tf_checkpoint._SPECIAL.items()}  # pylint: disable=protected-access
  if name in special:
    return special[name], False
  parts = name.split(".")
  leaf = parts[-1]
  body = "/".join(parts[:-1])
  body = re.sub(r"layer/(\d+)", r"layer_\1", body.replace(".", "/"))
  if "LayerNorm" in body:
    return f"{body}/{ {'weight': 'gamma', 'bias': 'beta'}[leaf] }", False
  if "embeddings" in body and leaf == "weight":
    return body, False
  return f"{body}/{'kernel' if leaf == 'weight' else 'bias'}", leaf == "weight"


def write_tf(folder, state, config):
  """A Google-format TF checkpoint of an HF state (with Adam slots and global_step, which the
  reader skips) and its bert_config.json; returns the checkpoint prefix."""
  import tensorflow as tf
  names, tensors = [], []
  for name, value in state.items():
    tf_name, transpose = hf_to_tf_name(name)
    names.append(tf_name)
    tensors.append(tf.constant(value.T if transpose else value))
    names.append(tf_name + "/adam_m")  # optimizer slots are skipped
    tensors.append(tf.constant(np.zeros_like(value)))
  names.append("global_step")
  tensors.append(tf.constant(np.int64(1000)))
  prefix = os.path.join(folder, "bert_model.ckpt")
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  with open(os.path.join(folder, "bert_config.json"), "w") as f:
    json.dump(config.to_json_dict(), f)
  return prefix
