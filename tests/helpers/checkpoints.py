"""Small checkpoints the tests write themselves: a Google-format TF checkpoint of random
weights (the layout of google-research/bert's releases), and a random CoNLL-2003 tagger
saved as an HF folder (what tag_spans reads)."""
import json
import os
import re

import numpy as np

from bert_jax.weights import hf, mapping, tf_checkpoint
from bert_jax.models.config import BertConfig

CONFIG = BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=40, max_position_embeddings=16)


def random_state(config=CONFIG, seed=0, heads=True):
  """An HF-named state dict with random values of the right shapes."""
  rng = np.random.default_rng(seed)
  shapes = hf.expected_shapes(config, with_heads=heads)
  prefix = "bert/" if heads else ""
  state = {}
  for ours, hf_name, layout in mapping.all_rows(config, prefix, heads):
    ours_value = rng.normal(size=shapes[ours]).astype(np.float32)
    state[hf_name] = layout.to_hf(ours_value, config)
  return state


def hf_to_tf_name(name):
  """An HF tensor name -> (its TF checkpoint name, whether the value is transposed)."""
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


def write_tf(folder, state, config=CONFIG):
  """A Google-format TF checkpoint of an HF state (with Adam slots and global_step, which the
  reader skips) and its bert_config.json (`config`'s); returns the checkpoint prefix."""
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


def random_tagger(folder: str, vocab_path: str, column: str, seed: int) -> str:
  """A tiny random BERT tagger of `column`'s CoNLL tags as an HF folder with the vocab at
  `vocab_path`; its weights scaled up so that the tags vary by word."""
  import jax
  from flax import linen as nn
  from bert_jax.finetune import conll_reader
  from bert_jax.models import specs
  from bert_jax.models.config import config_for_size
  config = config_for_size("tiny", num_hidden_layers=1, max_position_embeddings=64)
  spec = {"headed_model": "token_classification",
          "num_labels": len(conll_reader.COLUMNS[column].labels)}
  model = specs.build(config, spec)
  params = nn.unbox(model.init(jax.random.key(seed), np.zeros((1, 4), np.int32))["params"])
  params = jax.tree.map(lambda x: np.asarray(x) * 20.0, params)  # tags vary by word
  hf.save(folder, config, params, vocab_path=vocab_path, spec=spec)
  return folder
