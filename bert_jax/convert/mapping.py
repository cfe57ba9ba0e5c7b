"""Our param tree <-> HF `BertForPreTraining` state-dict names, kept as data.

HF names are the hub between formats: a Google TF1 checkpoint is renamed to HF names
(tf.py) and then goes through the same table. Each row says how one tensor changes
layout; the table is expanded per layer from the config.

Layouts: HF `nn.Linear.weight` is [out, in]; our Dense kernel is [in, out]; our attention
projections are DenseGeneral kernels [H, N, D] (q/k/v) and [N, D, H] (output).
"""
import dataclasses
from typing import Callable

import numpy as np

from bert_jax.models.config import BertConfig

Params = dict  # nested {name: {...: np.ndarray}}


@dataclasses.dataclass(frozen=True)
class Layout:
  """How one tensor goes from HF layout to ours (`to_ours`) and back (`to_hf`)."""
  to_ours: Callable[[np.ndarray, BertConfig], np.ndarray]
  to_hf: Callable[[np.ndarray, BertConfig], np.ndarray]


SAME = Layout(lambda w, c: w, lambda w, c: w)
LINEAR = Layout(lambda w, c: w.T, lambda w, c: w.T)
QKV_KERNEL = Layout(
    lambda w, c: w.T.reshape(c.hidden_size, c.num_attention_heads, c.head_dim),
    lambda w, c: w.reshape(c.hidden_size, c.hidden_size).T)
QKV_BIAS = Layout(
    lambda w, c: w.reshape(c.num_attention_heads, c.head_dim),
    lambda w, c: w.reshape(c.hidden_size))
ATTN_OUT_KERNEL = Layout(
    lambda w, c: w.T.reshape(c.num_attention_heads, c.head_dim, c.hidden_size),
    lambda w, c: w.reshape(c.hidden_size, c.hidden_size).T)


def _dense(ours: str, hf: str, kernel: Layout = LINEAR, bias: Layout = SAME):
  return [(f"{ours}/kernel", f"{hf}.weight", kernel), (f"{ours}/bias", f"{hf}.bias", bias)]


def _norm(ours: str, hf: str):
  return [(f"{ours}/scale", f"{hf}.weight", SAME), (f"{ours}/bias", f"{hf}.bias", SAME)]


def encoder_rows(config: BertConfig, with_pooler: bool = True):
  """(our path under the encoder, HF name without the `bert.` prefix, layout) rows."""
  rows = [
      ("embeddings/word_embeddings/embedding", "embeddings.word_embeddings.weight", SAME),
      ("embeddings/position_embeddings/embedding", "embeddings.position_embeddings.weight",
       SAME),
      ("embeddings/token_type_embeddings/embedding",
       "embeddings.token_type_embeddings.weight", SAME),
      *_norm("embeddings/layer_norm", "embeddings.LayerNorm"),
  ]
  for i in range(config.num_hidden_layers):
    ours, hf = f"encoder/layer_{i}", f"encoder.layer.{i}"
    for proj in ("query", "key", "value"):
      rows += _dense(f"{ours}/attention/{proj}", f"{hf}.attention.self.{proj}",
                     QKV_KERNEL, QKV_BIAS)
    rows += _dense(f"{ours}/attention/out", f"{hf}.attention.output.dense", ATTN_OUT_KERNEL)
    rows += _norm(f"{ours}/attention_layer_norm", f"{hf}.attention.output.LayerNorm")
    rows += _dense(f"{ours}/intermediate", f"{hf}.intermediate.dense")
    rows += _dense(f"{ours}/output", f"{hf}.output.dense")
    rows += _norm(f"{ours}/output_layer_norm", f"{hf}.output.LayerNorm")
  if with_pooler:
    rows += _dense("pooler/dense", "pooler.dense")
  return rows


def pretraining_head_rows():
  """Rows of BertForPreTraining's heads (HF names under `cls.`)."""
  return [
      *_dense("mlm_head/transform", "cls.predictions.transform.dense"),
      *_norm("mlm_head/transform_layer_norm", "cls.predictions.transform.LayerNorm"),
      ("mlm_head/output_bias", "cls.predictions.bias", SAME),
      *_dense("nsp_head/dense", "cls.seq_relationship"),
  ]


def all_rows(config: BertConfig, encoder_prefix: str, with_heads: bool, with_pooler=True):
  """Rows for a whole model. encoder_prefix is "bert/" inside task models, "" for BertModel."""
  rows = [(encoder_prefix + ours, "bert." + hf, layout)
          for ours, hf, layout in encoder_rows(config, with_pooler)]
  if with_heads:
    rows += pretraining_head_rows()
  return rows


# --- nested <-> flat ------------------------------------------------------------------

def flatten(params: Params, prefix: str = "") -> dict[str, np.ndarray]:
  flat = {}
  for key, value in params.items():
    path = f"{prefix}{key}"
    if isinstance(value, dict):
      flat.update(flatten(value, path + "/"))
    else:
      flat[path] = value
  return flat


def unflatten(flat: dict[str, np.ndarray]) -> Params:
  nested: Params = {}
  for path, value in flat.items():
    node = nested
    *parents, leaf = path.split("/")
    for name in parents:
      node = node.setdefault(name, {})
    node[leaf] = value
  return nested
