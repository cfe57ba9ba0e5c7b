"""`load_pretrained(path)`: one entry for HF folders, TF checkpoints and our checkpoints."""
import os

import numpy as np

from bert_jax import checkpoint
from bert_jax.convert import hf, tf_checkpoint
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel
from bert_jax.models.layout import stack_layers
from bert_jax.models.tasks import BertForPreTraining


def detect_format(path: str) -> str:
  """"native" (ours: saved model or training workdir), "hf" or "tf"."""
  if not os.path.exists(path) and not tf_checkpoint.is_tf_checkpoint(path):
    raise FileNotFoundError(f"{path}: no such file or folder")
  if checkpoint.is_native(path):
    return "native"
  if tf_checkpoint.is_tf_checkpoint(path):
    return "tf"
  if os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")):
    return "hf"
  raise ValueError(f"{path}: not an HF folder (config.json + model.safetensors), a TF "
                   "checkpoint (bert_config.json + *.ckpt.index) or a bert_jax checkpoint")


def load_config(path: str) -> BertConfig:
  """The model config of any supported format, without reading the weights."""
  fmt = detect_format(path)
  if fmt == "native":
    return checkpoint.read_model_config(path)
  if fmt == "hf":
    return hf.read_config(path)
  return BertConfig.from_json_file(tf_checkpoint.find_checkpoint(path)[1])


def load_params(path: str, heads: str = "auto") -> tuple[BertConfig, dict, bool]:
  """(config, unrolled float32 params, has_pretraining_heads) from any supported format."""
  fmt = detect_format(path)
  if fmt == "native":
    config, params = checkpoint.load_model_params(path)
    with_heads = "mlm_head" in params
    if heads == "none" and with_heads:
      params, with_heads = params["bert"], False
    elif heads == "pretraining" and not with_heads:
      raise ValueError(f"{path}: has no pretraining heads")
  else:
    loader = hf.load if fmt == "hf" else tf_checkpoint.load
    config, params, with_heads = loader(path, heads)
  check_vocab(path, config)
  return config, params, with_heads


def check_vocab(path: str, config: BertConfig) -> None:
  """A vocab.txt beside the weights must have exactly vocab_size entries."""
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  vocab = os.path.join(folder, "vocab.txt")
  if os.path.exists(vocab):
    with open(vocab, encoding="utf-8") as f:
      entries = sum(1 for line in f if line.rstrip("\n"))
    if entries != config.vocab_size:
      raise ValueError(f"{vocab}: {entries} entries but the model's vocab_size is "
                       f"{config.vocab_size}")


def model_for(config: BertConfig, params: dict):
  """The module that matches a param tree: BertForPreTraining or BertModel."""
  if "mlm_head" in params:
    return BertForPreTraining(config)
  encoder = params.get("bert", params)
  return BertModel(config, add_pooling_layer="pooler" in encoder)


def load_pretrained(path: str, heads: str = "auto", **config_overrides):
  """Loads weights from an HF folder, a TF checkpoint or a bert_jax checkpoint/workdir.

  Returns (model, variables): `model.apply(variables, input_ids, token_type_ids,
  attention_mask)` gives an EncoderOutput (BertModel) or a PreTrainingOutput
  (BertForPreTraining, when the checkpoint has MLM/NSP heads and heads != "none").
  config_overrides change implementation fields such as dtype="bfloat16" or
  scan_layers=True (params are then stacked to match).
  """
  config, params, _ = load_params(path, heads)
  config = config.replace(**config_overrides)
  if config.scan_layers:
    params = stack_layers(params, config.num_hidden_layers)
  params = _to_jax(params)
  return model_for(config, params), {"params": params}


def _to_jax(params):
  import jax
  return jax.tree.map(lambda x: jax.numpy.asarray(np.asarray(x, np.float32)), params)
