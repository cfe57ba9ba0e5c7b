"""HuggingFace folders (config.json + model.safetensors) of every family, in and out.

config.json's `model_type` picks the family (bert, roberta, distilbert, albert, electra,
modernbert: the table in convert/families.py); its tensor names are
`mapping.NAMES[family]`. Accepted: each family's bare encoder (BertModel, RobertaModel,
DistilBertModel, AlbertModel, ElectraModel, ModernBertModel) and its HF classes with heads
(BertForPreTraining, RobertaForMaskedLM, DistilBertForMaskedLM, AlbertForPreTraining,
ElectraForMaskedLM (the generator), ElectraForPreTraining (the discriminator),
ModernBertForMaskedLM), with or without the family prefix (`bert.`, `roberta.`, `model.`,
...), old-style LayerNorm `gamma`/`beta` names, sharded safetensors with an index. Only
safetensors are read: a folder with just
`pytorch_model.bin` is refused (no pickle).
"""
import json
import os

import numpy as np
from safetensors.numpy import load_file, save_file

from bert_jax.convert import families, mapping
from bert_jax.models.config import BertConfig

_BUFFERS = ("position_ids", "token_type_ids")  # non-parameter buffers some versions saved


def read_config(folder: str) -> BertConfig:
  """The folder's config.json, any family (its model_type picks the reader)."""
  path = os.path.join(folder, "config.json")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{folder}: no config.json (is this an HF model folder?)")
  try:
    with open(path) as f:
      raw = json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None
  return families.config_from_hf(raw, path)


def read_state(folder: str) -> dict[str, np.ndarray]:
  """All tensors of the folder's safetensors file(s), by name."""
  single = os.path.join(folder, "model.safetensors")
  index = os.path.join(folder, "model.safetensors.index.json")
  if os.path.exists(single):
    return load_file(single)
  if os.path.exists(index):
    with open(index) as f:
      shards = sorted(set(json.load(f)["weight_map"].values()))
    state = {}
    for shard in shards:
      state.update(load_file(os.path.join(folder, shard)))
    return state
  if os.path.exists(os.path.join(folder, "pytorch_model.bin")):
    raise ValueError(f"{folder}: only pytorch_model.bin found; pickle files are not loaded. "
                     "Convert it to model.safetensors first.")
  raise FileNotFoundError(f"{folder}: no model.safetensors or model.safetensors.index.json")


def normalize_names(state: dict[str, np.ndarray], source: str,
                    family: str = "bert") -> dict[str, np.ndarray]:
  """Canonical names of the family's pretraining model: the family prefix (`bert.` ...),
  weight/bias, no buffers, no tied copies (each checked equal to what it copies)."""
  names = mapping.NAMES[family]
  out = {}
  for name, value in state.items():
    if name.endswith(_BUFFERS):
      continue
    if name.startswith(names.encoder_roots):
      name = f"{names.prefix}.{name}"
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias")
    out[name] = np.asarray(value)
  for copy, original in names.tied.items():
    value = out.pop(copy, None)
    if value is None:
      continue
    if original not in out:
      out[original] = value  # e.g. an MLM bias saved only as the decoder's
    elif value.shape != out[original].shape or not np.array_equal(value, out[original]):
      raise ValueError(f"{source}: {copy} is not tied to {original}; untied MLM decoders "
                       "are not supported")
  return out


def state_to_params(state: dict[str, np.ndarray], config: BertConfig, source: str,
                    heads: str = "auto") -> tuple[dict, bool]:
  """Canonical HF state -> our nested params. Returns (params, has_pretraining_heads).

  heads: "auto" (take the pretraining heads when present), "pretraining" (require them)
  or "none" (drop every head tensor: `cls.`, `lm_head.`, `vocab_*.` by family). The
  model the params are for (`expected_shapes`) decides which tensors must be there; any
  tensor left unconsumed is an error.
  """
  if heads not in ("auto", "pretraining", "none"):
    raise ValueError(f"heads={heads!r}: expected 'auto', 'pretraining' or 'none'")
  names = mapping.names_of(config)
  state = dict(state)
  if heads == "none":
    state = {k: v for k, v in state.items() if not k.startswith(names.head_roots)}
  with_heads = heads == "pretraining" or any(k.startswith(names.head_roots) for k in state)
  prefix = "bert/" if with_heads else ""
  rows = mapping.family_rows(config, prefix)
  with_pooler = any(hf_name in state for ours, hf_name, _ in rows if "pooler/" in ours)
  task_model = None
  if with_heads:  # which of the family's HF head classes: by the heads the state has
    present = {ours.split("/")[0] for ours, hf_name, _ in rows if hf_name in state}
    task_model = head_model(config, present - {"bert"}, source)
  expected = expected_shapes(config, with_heads, with_pooler, task_model)
  rows = [row for row in rows if row[0] in expected]
  unmapped = sorted(set(expected) - {ours for ours, _, _ in rows})
  if unmapped:
    raise ValueError(f"{source}: the model has no HF {config.family} name for {unmapped[:5]}")
  flat = {}
  for ours, hf_name, layout in rows:
    if hf_name not in state:
      raise ValueError(f"{source}: missing tensor {hf_name}")
    value = layout.to_ours(_check_hf_shape(state.pop(hf_name), hf_name, ours, expected,
                                           layout, config, source), config)
    flat[ours] = value.astype(np.float32)
  if state:
    left = sorted(state)
    raise ValueError(f"{source}: unknown tensor(s) {left[:5]}"
                     f"{' and %d more' % (len(left) - 5) if len(left) > 5 else ''}")
  return mapping.unflatten(flat), with_heads


def _check_hf_shape(value, hf_name, ours, expected, layout, config, source):
  want = tuple(layout.to_hf(np.zeros(expected[ours], np.float32), config).shape)
  if tuple(value.shape) != want:
    hint = ""
    if hf_name.endswith("word_embeddings.weight"):
      hint = " (vocab size of the checkpoint vs vocab_size in the config)"
    raise ValueError(f"{source}: tensor {hf_name} has shape {tuple(value.shape)} but the "
                     f"config expects {want}{hint}")
  return value


def head_model(config: BertConfig, heads: set[str], source: str = "params") -> str:
  """The task model (a `task_models.TASK_MODELS` name) of the family's HF head class that
  has the given head modules (e.g. {"mlm_head", "sop_head"}; ELECTRA's {"rtd_head"} is
  the discriminator): the first of the family's `head_classes` whose heads include them."""
  for task_model in families.hf_family(config.family).head_classes:
    if heads <= set(expected_shapes(config, True, task_model=task_model, top_level=True)):
      return task_model
  raise ValueError(f"{source}: no HF {config.family} class has the heads {sorted(heads)}")


def expected_shapes(config: BertConfig, with_heads: bool, with_pooler: bool = True,
                    task_model: str | None = None, top_level: bool = False):
  """Flat {our path: shape} of the model that `state_to_params` produces: with_heads, the
  family's pretraining model (`task_model`, by default its first HF head class), else
  BertModel. top_level: only the set of first path components (the head modules)."""
  import jax  # local: the converter's numpy paths do not need jax otherwise
  import jax.numpy as jnp
  from flax import linen as nn

  from bert_jax.models.bert import BertModel
  from bert_jax.models import task_models

  config = config.replace(scan_layers=False)
  if with_heads:
    task_model = task_model or next(iter(families.hf_family(config.family).head_classes))
    model = task_models.build(config, {"task_model": task_model})
  else:
    model = BertModel(config, add_pooling_layer=with_pooler)
  ids = jnp.zeros((1, 2), jnp.int32)
  shapes = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), ids)["params"]))
  if top_level:
    return set(shapes) - {"bert"}
  return {k: tuple(v.shape) for k, v in mapping.flatten(shapes).items()}


def params_to_state(params: dict, config: BertConfig) -> dict[str, np.ndarray]:
  """Our params (BertModel or a pretraining model of the family's HF head classes,
  unscanned) -> HF state dict of the family."""
  flat = mapping.flatten(params)
  with_heads = "bert" in params
  prefix = "bert/" if with_heads else ""
  with_pooler = f"{prefix}pooler/dense/kernel" in flat
  heads = set(params) - {"bert"} if with_heads else None
  expected = expected_shapes(config, with_heads, with_pooler,
                             head_model(config, heads) if with_heads else None)
  state = {}
  for ours, hf_name, layout in mapping.family_rows(config, prefix):
    if ours not in expected:
      continue
    if ours not in flat:
      raise ValueError(f"params: missing {ours}")
    state[hf_name] = np.ascontiguousarray(layout.to_hf(np.asarray(flat.pop(ours)), config),
                                          dtype=np.float32)
  if flat:
    raise ValueError(f"params: no HF {config.family} name for {sorted(flat)[:5]}")
  return state


def load(folder: str, heads: str = "auto"):
  """HF folder of any family -> (BertConfig, params, has_pretraining_heads)."""
  config = read_config(folder)
  state = normalize_names(read_state(folder), folder, config.family)
  params, with_heads = state_to_params(state, config, folder, heads)
  return config, params, with_heads


def save(folder: str, config: BertConfig, params: dict, vocab_path: str | None = None,
         lower_case: bool = True) -> None:
  """Writes config.json + model.safetensors (+ vocab.txt/tokenizer_config.json), loadable by
  the family's HF class: the head class of `params`' heads (its pretraining model; ELECTRA's
  discriminator for the RTD head), else its encoder."""
  os.makedirs(folder, exist_ok=True)
  hf_config = families.config_to_hf(config)
  state = params_to_state(params, config)
  family = families.hf_family(config.family)
  with_heads = "bert" in params
  hf_config["architectures"] = [
      family.head_classes[head_model(config, set(params) - {"bert"})] if with_heads
      else family.encoder_class]
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(hf_config, f, indent=2)
  save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
  if vocab_path:
    with open(vocab_path) as src, open(os.path.join(folder, "vocab.txt"), "w") as dst:
      dst.write(src.read())
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
      json.dump({"do_lower_case": lower_case, "tokenizer_class": "BertTokenizer"}, f)
