"""HuggingFace tensors of every family <-> our params: an HF folder's state dict as our
params, and ours written as an HF folder.

  state = hf_files.read_state(folder)  # the folder's files: hf_files.py
  params, has_heads = state_to_params(normalize_names(state, folder, family), config, folder)
  save(folder, config, params, vocab_path=vocab_path, spec=spec)

config.json's `model_type` picks the family (bert, roberta, distilbert, albert, electra,
modernbert, ernie: the table in weights/hf_families.py); its tensor names are
`mapping.NAMES[family]`. Accepted: each family's bare encoder (BertModel, RobertaModel,
DistilBertModel, AlbertModel, ElectraModel, ModernBertModel, ErnieModel) and its HF classes
with heads (BertForPreTraining, RobertaForMaskedLM, DistilBertForMaskedLM,
AlbertForPreTraining, ElectraForMaskedLM (the generator), ElectraForPreTraining (the
discriminator), ModernBertForMaskedLM, ErnieForPreTraining), the fine-tuning classes whose heads are ours (`task_classes` in
hf_families.py: BertForSequenceClassification, RobertaForTokenClassification,
ModernBertForQuestionAnswering, ...; the class in config.json's `architectures` names the
task, ModernBERT's `classifier_pooling` the sentence vector), with or without the family prefix
(`bert.`, `roberta.`, `model.`, ...), old-style LayerNorm `gamma`/`beta` names. The folder's
files (config.json read, sharded safetensors with an index, a pytorch_model.bin refused or
converted) are hf_files.py's.
"""
import json
import os

import numpy as np
from safetensors.numpy import save_file

from bert_jax.weights import hf_families, mapping
from bert_jax.models.config import BertConfig
from bert_jax.text.wordpiece import WordPieceTokenizer

_BUFFERS = ("position_ids", "token_type_ids")  # non-parameter buffers some versions saved

_LABELLED = ("sequence_classification", "token_classification")  # specs with num_labels
_FINE_TUNING = _LABELLED + ("question_answering", "multiple_choice")
# A prompt-based classifier is the encoder + MLM head: HF's masked LM class of the family.
_PROMPT = "prompt_classification"
_INIT_SHAPES = {"multiple_choice": (1, 1, 2)}  # input ids to init a model with: [B, C, T]
_TASK_SUFFIXES = ("ForSequenceClassification", "ForTokenClassification",
                  "ForQuestionAnswering", "ForMultipleChoice")


def init_shape(headed_model: str) -> tuple[int, ...]:
  """The shape of the input ids a headed model is initialised with ([B, C, T] for multiple
  choice, else [B, T])."""
  return _INIT_SHAPES.get(headed_model, (1, 2))


def headed_spec_of(raw: dict, path: str, family: hf_families.HFFamily) -> dict | None:
  """The fine-tuning headed model (a headed-model spec) of a config.json read from `path`
  (its model_type's `family` entry) that names one of the family's HF task classes in
  `architectures` (e.g. BertForSequenceClassification with 3 labels ->
  {"headed_model": "sequence_classification", "num_labels": 3}); else None."""
  classes = raw.get("architectures") or ()
  tasks = [family.task_of_class(name) for name in classes]
  task = next((t for t in tasks if t), None)
  if task is None:
    other = [c for c in classes if c.endswith(_TASK_SUFFIXES)]
    if other:
      ours = ", ".join(c for _, c in family.task_classes) or "none"
      raise ValueError(f"{path}: {other[0]}'s head is not one of ours (HF classes with "
                       f"ours: {ours}); heads='none' loads its encoder")
    return None
  spec = {"headed_model": task}
  pooling = _pooling_of(raw, family, task, path)
  if pooling != "pooler":
    spec["pooling"] = pooling
  if task in _LABELLED:
    spec["num_labels"] = len(raw["id2label"]) if raw.get("id2label") else int(
        raw.get("num_labels", 2))
  return spec


def _pooling_of(raw: dict, family: hf_families.HFFamily, task: str, path: str) -> str:
  """Our pooling for an HF config.json's `classifier_pooling` (families that have one)."""
  ours = {theirs: pooling for pooling, theirs in family.classifier_pooling}
  if not ours or task not in ("sequence_classification", "multiple_choice"):
    return "pooler"
  theirs = raw.get("classifier_pooling", dict(family.classifier_pooling)["pooler"])
  if ours.get(theirs) is None or (task == "multiple_choice" and ours[theirs] != "pooler"):
    raise ValueError(f"{path}: classifier_pooling={theirs!r} is not supported for {task} "
                     f"(supported: {', '.join(ours)}; multiple choice only the [CLS] row)")
  return ours[theirs]


def _export_spec(spec: dict, config: BertConfig) -> str:
  """The HF class of a fine-tuned model's spec, or a one-line error saying why none."""
  family = hf_families.hf_family(config.family)
  task = spec["headed_model"]
  if task not in dict(family.task_classes):
    raise ValueError(f"HF {config.family} has no class with our {task} head (HF classes "
                     f"with ours: {', '.join(c for _, c in family.task_classes) or 'none'})")
  pooling = spec.get("pooling", "pooler")
  hf_poolings = dict(family.classifier_pooling) if task == "sequence_classification" else {}
  if spec.get("feature_layers") or (pooling != "pooler" and pooling not in hf_poolings):
    raise ValueError(f"a {task} head on feature_layers={spec.get('feature_layers')} / "
                     f"pooling={spec.get('pooling')!r} has no HF class (HF reads the pooler)")
  return dict(family.task_classes)[task]


def _build_spec(spec: dict) -> dict:
  """The fields of a spec that decide the params (what expected_shapes builds)."""
  keep = ("headed_model", "num_labels") if spec["headed_model"] in _LABELLED else ("headed_model",)
  return {k: spec[k] for k in keep if k in spec}


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
  for name in names.unused:
    value = out.pop(name, None)
    if value is not None and np.any(value):
      raise ValueError(f"{source}: {name} is not zero, but HF's {family} forward never adds "
                       "it; this model cannot be read as HF runs it")
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
                    heads: str = "auto", spec: dict | None = None,
                    family: hf_families.HFFamily | None = None) -> tuple[dict, bool]:
  """Canonical HF state -> our nested params. Returns (params, has_heads).

  heads: "auto" (take the heads when present), "pretraining" (require them) or "none"
  (keep the encoder's tensors only, any head dropped). spec: the
  fine-tuning headed model the state is for (`headed_spec_of`: its HF class's names), else the
  family's pretraining classes are matched by the heads present. The model the params
  are for (`expected_shapes`) decides which tensors must be there; any tensor left
  unconsumed is an error. family: config.family's table entry where already looked up.
  """
  if heads not in ("auto", "pretraining", "none"):
    raise ValueError(f"heads={heads!r}: expected 'auto', 'pretraining' or 'none'")
  names = mapping.names_of(config)
  state = dict(state)
  if heads == "none":  # the encoder's tensors only (canonical names carry its prefix)
    state, spec = {k: v for k, v in state.items() if k.startswith(names.prefix + ".")}, None
  with_heads = (heads == "pretraining" or spec is not None
                or any(k.startswith(names.head_roots) for k in state))
  prefix = "bert/" if with_heads else ""
  rows = mapping.family_rows(config, prefix, spec and spec["headed_model"])
  with_pooler = any(hf_name in state for ours, hf_name, _ in rows if "pooler/" in ours)
  headed_model = None
  if spec is not None:
    headed_model = _build_spec(spec)
  elif with_heads:  # which of the family's HF head classes: by the heads the state has
    present = {ours.split("/")[0] for ours, hf_name, _ in rows if hf_name in state}
    headed_model = head_model(config, present - {"bert"}, source, family)
  expected = expected_shapes(config, with_heads, with_pooler, headed_model, family=family)
  rows = [row for row in rows if row[0] in expected]
  unmapped = sorted(set(expected) - {ours for ours, _, _ in rows})
  if unmapped:
    raise ValueError(f"{source}: the model has no HF {config.family} name for {unmapped[:5]}")
  absent = absent_modules(rows, state)
  if heads == "pretraining" and not [m for m in heads_of(rows) - absent if "pooler" not in m]:
    absent = set()  # heads required: the first missing one is the error
  rows = [row for row in rows if _module_of(row[0]) not in absent]
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


def _module_of(ours: str) -> str:
  """The module a tensor of ours belongs to, as a checkpoint may lack it whole: the pooler
  ("bert/pooler", "pooler"), a head ("mlm_head", "nsp_head", "classifier", ...), else ""
  (the encoder)."""
  parts = ours.split("/")
  if "pooler" in parts:
    return "/".join(parts[:parts.index("pooler") + 1])
  return "" if parts[0] in ("bert", "embeddings", "encoder") else parts[0]


def heads_of(rows) -> set[str]:
  """The poolers and heads (`_module_of`) that `rows` have."""
  return {_module_of(ours) for ours, _, _ in rows} - {""}


def absent_modules(rows, state: dict) -> set[str]:
  """The poolers and heads of `rows` that `state` lacks whole (HF's BertForMaskedLM has
  no pooler and no NSP head, a token tagger no pooler): the loader leaves them out and
  the model's own init starts them, named. A module with some of its tensors present is
  not absent (the first missing one is the error), nor is the encoder ever."""
  present: dict[str, bool] = {}
  for ours, hf_name, _ in rows:
    module = _module_of(ours)
    if module:
      present[module] = present.get(module, False) or hf_name in state
  return {module for module, found in present.items() if not found}


def _check_hf_shape(value, hf_name, ours, expected, layout, config, source):
  want = tuple(layout.to_hf(np.zeros(expected[ours], np.float32), config).shape)
  if tuple(value.shape) != want:
    hint = ""
    if hf_name.endswith("word_embeddings.weight"):
      hint = " (vocab size of the checkpoint vs vocab_size in the config)"
    raise ValueError(f"{source}: tensor {hf_name} has shape {tuple(value.shape)} but the "
                     f"config expects {want}{hint}")
  return value


def head_model(config: BertConfig, heads: set[str], source: str = "params",
               family: hf_families.HFFamily | None = None) -> str:
  """The pretraining model (a `specs.HEADED_MODELS` name) of the family's HF head class
  that has the given head modules (e.g. {"mlm_head", "sop_head"}; ELECTRA's {"rtd_head"}
  is the discriminator): the first such class. Fine-tuned heads are named by a spec
  (`headed_spec_of`, a workdir's model_config.json), not guessed: a classifier alone fits a
  classifier, a regressor and a multiple-choice model alike. family: config.family's
  table entry where already looked up."""
  family = family or hf_families.hf_family(config.family)
  for headed_model in family.head_classes:
    if headed_model in dict(family.task_classes):
      continue
    if heads <= set(expected_shapes(config, True, headed_model=headed_model, top_level=True,
                                    family=family)):
      return headed_model
  raise ValueError(f"{source}: no HF {config.family} pretraining class has the heads "
                   f"{sorted(heads)} (a fine-tuned model needs its task: an HF config.json "
                   "naming its class in architectures, or a bert_jax workdir)")


def expected_shapes(config: BertConfig, with_heads: bool, with_pooler: bool = True,
                    headed_model: str | dict | None = None, top_level: bool = False,
                    family: hf_families.HFFamily | None = None):
  """Flat {our path: shape} of the model that `state_to_params` produces: with_heads, the
  family's pretraining model (`headed_model`, by default its first HF head class) or a
  fine-tuning spec (a dict), else BertModel. top_level: only the set of first path
  components (the head modules). family: config.family's table entry where already
  looked up."""
  import jax  # local: the converter's numpy paths do not need jax otherwise
  import jax.numpy as jnp
  from flax import linen as nn

  from bert_jax.models.bert import BertModel
  from bert_jax.models import specs

  config = config.replace(scan_layers=False)
  if with_heads:
    family = family or hf_families.hf_family(config.family)
    headed_model = headed_model or next(iter(family.head_classes))
    model = specs.build(config, headed_model if isinstance(headed_model, dict)
                              else {"headed_model": headed_model})
  else:
    model = BertModel(config, add_pooling_layer=with_pooler)
  name = headed_model.get("headed_model") if isinstance(headed_model, dict) else headed_model
  ids = jnp.zeros(_INIT_SHAPES.get(name, (1, 2)) if with_heads else (1, 2), jnp.int32)
  shapes = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), ids)["params"]))
  if top_level:
    return set(shapes) - {"bert"}
  return {k: tuple(v.shape) for k, v in mapping.flatten(shapes).items()}


def params_to_state(params: dict, config: BertConfig,
                    spec: dict | None = None) -> dict[str, np.ndarray]:
  """Our params (BertModel, a pretraining model of the family's HF head classes, or the
  fine-tuned headed model `spec` names; unscanned) -> HF state dict of the family."""
  flat = mapping.flatten(params)
  with_heads = "bert" in params
  prefix = "bert/" if with_heads else ""
  with_pooler = f"{prefix}pooler/dense/kernel" in flat
  if spec is not None and spec["headed_model"] == _PROMPT:
    headed_model = dict(spec)  # its params: the encoder (no pooler) and the MLM head
  elif spec is not None:
    _export_spec(spec, config)
    headed_model = _build_spec(spec)
  else:
    headed_model = head_model(config, set(params) - {"bert"}) if with_heads else None
  expected = expected_shapes(config, with_heads, with_pooler, headed_model)
  state = {}
  for ours, hf_name, layout in mapping.family_rows(config, prefix,
                                                   spec and spec["headed_model"]):
    if ours not in expected:
      continue
    if ours not in flat:
      raise ValueError(f"params: missing {ours}")
    state[hf_name] = np.ascontiguousarray(layout.to_hf(np.asarray(flat.pop(ours)), config),
                                          dtype=np.float32)
  if flat:
    raise ValueError(f"params: no HF {config.family} name for {sorted(flat)[:5]}")
  written_roots = {name.split(".")[0] + "." for name in state}
  for name, shape in mapping.names_of(config).unused.items():  # as HF's class holds them
    if name.split(".")[0] + "." in written_roots:
      state[name] = np.zeros(shape(config), np.float32)
  return state


def _masked_lm_only(params: dict, config: BertConfig) -> bool:
  """The encoder without a pooler and the MLM head alone (what HF's BertForMaskedLM,
  AlbertForMaskedLM, ErnieForMaskedLM hold): exported as that class, whose params are a
  prompt classifier's (the label tokens only pick logits)."""
  return (bool(hf_families.hf_family(config.family).masked_lm_class)
          and set(params) == {"bert", "mlm_head"} and "pooler" not in params["bert"])


def save(folder: str, config: BertConfig, params: dict, vocab_path: str | None = None,
         lower_case: bool = True, spec: dict | None = None,
         labels: list[str] | None = None, token_ids: dict[str, int] | None = None) -> None:
  """Writes config.json + model.safetensors (+ vocab.txt/tokenizer_config.json), loadable by
  the family's HF class: the fine-tuned task's class when `spec` names a fine-tuning headed
  model (e.g. BertForSequenceClassification, with num_labels; a prompt-based classifier:
  the family's masked LM, e.g. BertForMaskedLM), else the head class of
  `params`' heads (its pretraining model; ELECTRA's discriminator for the RTD head), else
  its encoder. `labels`: the class names for config.json's id2label (else LABEL_i).
  `token_ids`: the tokenizer's special ids ({"cls_id": 0, "sep_id": 2}) for the config
  fields that name them (`HFFamily.token_id_fields`; a WordPiece `vocab_path` gives its
  own), so that they are not the HF class's defaults of another vocabulary."""
  if spec is not None and spec["headed_model"] not in _FINE_TUNING + (_PROMPT,):
    spec = None  # a pretraining model or an encoder: named by its params
  if spec is None and _masked_lm_only(params, config):
    spec = {"headed_model": _PROMPT, "label_token_ids": [0], "mask_token_id": 0}
  os.makedirs(folder, exist_ok=True)
  hf_config = hf_families.config_to_hf(config)
  state = params_to_state(params, config, spec)
  family = hf_families.hf_family(config.family)
  with_heads = "bert" in params
  if spec is not None and spec["headed_model"] == _PROMPT:
    hf_config["architectures"] = [family.mlm_class]
  elif spec is not None:
    hf_config["architectures"] = [_export_spec(spec, config)]
    if family.classifier_pooling:
      hf_config["classifier_pooling"] = dict(family.classifier_pooling)[
          spec.get("pooling", "pooler")]
    if spec["headed_model"] in _LABELLED:
      count = spec["num_labels"]
      if labels is not None and len(labels) != count:
        raise ValueError(f"labels: {len(labels)} names for a head of {count} outputs")
      names = list(labels) if labels else [f"LABEL_{i}" for i in range(count)]
      hf_config["id2label"] = {str(i): name for i, name in enumerate(names)}
      hf_config["label2id"] = {name: i for i, name in enumerate(names)}
    if spec.get("problem_type"):  # e.g. multi_label_classification: HF's sigmoid and BCE
      hf_config["problem_type"] = spec["problem_type"]
  else:
    hf_config["architectures"] = [
        family.head_classes[head_model(config, set(params) - {"bert"})] if with_heads
        else family.encoder_class]
  if vocab_path:  # vocab.txt, tokenizer_config.json and tokenizer.json
    tokenizer = WordPieceTokenizer(vocab_path, lower_case=lower_case)
    tokenizer.save(folder)
    token_ids = {"cls_id": tokenizer.cls_id, "sep_id": tokenizer.sep_id, **(token_ids or {})}
  for field, role in family.token_id_fields:
    if token_ids and role in token_ids:
      hf_config[field] = int(token_ids[role])
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(hf_config, f, indent=2)
  save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
