"""The one weights loader: HF folders, Google TF checkpoints and bert_jax saved models /
training workdirs (pretrained or fine-tuned), for users and for the trainer alike (its
init chain, bert_jax/run/init_chain.py, starts from what this reads).

  source = resolve(path)                             # format, config, task, labels: read once
  model, variables = load_pretrained(path)           # the model with the checkpoint's heads
  config, params, with_heads = load_params(source)   # unrolled float32 numpy params

A path is resolved once into a `Pretrained`: its format detected (a TF checkpoint located)
once, its config file read once, and what the readers need taken from that one read: the
model config, the family's table entry, the recorded headed model and labels, a TF
checkpoint's prefix and folder; its weights files checked to be present and whole. Every
function here takes a path or a `Pretrained`, and a run passes the one it resolved. Each
format is one entry of `FORMATS` (how it is resolved, its tensors read, those mapped to
ours).

A bert_jax workdir records its model in model_config.json ("model": a headed-model spec),
so a fine-tuned workdir loads as its headed model (classifier, tagger, QA, multiple choice)
with its head. HF and TF checkpoints load as BertForPreTraining (with the family's MLM
and sentence heads) or BertModel; an HF folder's config.json `model_type` picks the family
(see bert_jax/weights/hf_families.py); ELECTRA's discriminator folder loads as
BertForReplacedTokenDetection, and an HF fine-tuned folder whose head is ours (its
`architectures`: BertForSequenceClassification, RobertaForTokenClassification,
AlbertForQuestionAnswering, ...) as that headed model.
"""
import dataclasses
import functools
import os
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.files import hub, storage
from bert_jax.files.hub import HubModel
from bert_jax.models import specs
from bert_jax.models.config import BertConfig
from bert_jax.models.layout import stack_layers, stacked_layout
from bert_jax.weights import checkpoint, hf, hf_families, hf_files, mapping, tf_checkpoint


def detect_format(path: str) -> str:
  """"native" (ours: saved model or training workdir), "hf" or "tf"."""
  return _detect(path)[0]


def _detect(path: str) -> tuple[str, tuple[str, str] | None]:
  """(format, a TF checkpoint's (prefix, bert_config.json path) else None): each format's
  files looked for once, in this order."""
  if checkpoint.is_native(path):
    return "native", None
  found = tf_checkpoint.locate(path)
  if found:
    return "tf", found
  if os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")):
    return "hf", None
  if not storage.exists(path):
    raise FileNotFoundError(f"{path}: no such file or folder")
  raise ValueError(f"{path}: not an HF folder (config.json + model.safetensors), a TF "
                   "checkpoint (bert_config.json + *.ckpt.index) or a bert_jax checkpoint")


@dataclasses.dataclass(frozen=True)
class Pretrained:
  """A pretrained model's path, resolved once (`resolve`): what every reader of it needs,
  so that none of them looks at its files again but to read the weights (`load`).

  path: where its files are read (a Hub id's snapshot folder; an HF folder or TF checkpoint
    in a bucket copied to a local folder; a bert_jax workdir or saved model as it is).
  format: "native" (ours: saved model or training workdir), "hf" or "tf".
  config: its model config.
  folder: the folder of its files (`path`, or a TF checkpoint prefix's folder), where its
    tokenizer's files are.
  family: its entry in the HF family table (`hf_families.FAMILIES`, by an HF config.json's
    model_type; BERT's for a TF checkpoint); None for ours.
  labels: its class names in logit order, where it records them.
  tf_prefix: a TF checkpoint's prefix (e.g. DIR/bert_model.ckpt); None for the others.
  recorded: the config file as read (a native model_config.json, an HF config.json; None
    for a TF checkpoint).
  hub: what was fetched where the path was a Hub id (`bert_jax.files.hub`; `path` is then
    its snapshot folder), else None.
  hold: the tensors read are kept for the next `load` until `release` (a run whose
    weights two readers take: the trainer's start and a cached frozen encoder).
  """
  path: str
  format: str
  config: BertConfig
  folder: str
  family: hf_families.HFFamily | None = None
  labels: list[str] | None = None
  tf_prefix: str | None = None
  recorded: dict | None = None
  hub: HubModel | None = None
  hold: bool = False
  _held: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

  @functools.cached_property
  def spec(self) -> dict | None:
    """The headed model it records: a native model_config.json's "model", an HF folder's
    fine-tuning class (e.g. {"headed_model": "sequence_classification", "num_labels": 3});
    None: read off the params (`model_spec`). Worked out once, where first asked for: an
    HF task class whose head is not ours is an error only where its heads are loaded."""
    return FORMATS[self.format].spec(self)

  def load(self, heads: str = "auto") -> tuple[dict, bool]:
    """(unrolled float32 params, has_heads): the weights read (only here, once while
    held) and mapped to ours."""
    return FORMATS[self.format].params(self, self.tensors(), heads)

  def tensors(self) -> dict:
    """The checkpoint's tensors as its files hold them: our params for ours, HF names for
    HF and TF (a TF checkpoint's renamed)."""
    if "tensors" in self._held:
      return self._held["tensors"]
    tensors = FORMATS[self.format].read(self)
    if self.hold:
      self._held["tensors"] = tensors
    return tensors

  def release(self) -> None:
    """Drops the tensors held (the run's params have them now)."""
    self._held.clear()


def _resolve_native(path: str, tf_files: None, check_weights: bool, **fields) -> Pretrained:
  del tf_files
  recorded = checkpoint.read_model_record(path)
  config = BertConfig.from_json_dict(
      recorded, source=os.path.join(path, checkpoint.MODEL_CONFIG))
  if check_weights:
    checkpoint.check_weights(path)
  return Pretrained(path, "native", config, path, labels=recorded.get("labels"),
                    recorded=recorded, **fields)


def _resolve_hf(path: str, tf_files: None, check_weights: bool, **fields) -> Pretrained:
  del tf_files
  recorded, config_path = hf_files.read_json(path)
  family = hf_families.hf_family(recorded.get("model_type", "bert"), config_path)
  config = family.config_from_hf(recorded, config_path)
  if check_weights:
    hf_files.check_weights(path)
  return Pretrained(path, "hf", config, path, family=family, labels=hf_files.labels_of(recorded),
                    recorded=recorded, **fields)


def _resolve_tf(path: str, tf_files: tuple[str, str], check_weights: bool,
                **fields) -> Pretrained:
  del check_weights  # TensorFlow's reader checks the files as it reads them
  prefix, config_path = tf_files
  config = tf_checkpoint.read_config(config_path)
  return Pretrained(path, "tf", config, os.path.dirname(config_path),
                    family=hf_families.hf_family(config.family), tf_prefix=prefix, **fields)


def _native_params(source: Pretrained, params: dict, heads: str) -> tuple[dict, bool]:
  with_heads = "mlm_head" in params
  if heads == "none" and "bert" in params:
    return params["bert"], False
  if heads == "pretraining" and not with_heads:
    raise ValueError(f"{source.path}: has no pretraining heads")
  return params, with_heads


def _hf_params(source: Pretrained, state: dict, heads: str) -> tuple[dict, bool]:
  return hf.state_to_params(state, source.config, source.path, heads,
                            source.spec if heads != "none" else None, source.family)


def _tf_params(source: Pretrained, state: dict, heads: str) -> tuple[dict, bool]:
  return hf.state_to_params(state, source.config, source.tf_prefix, heads,
                            family=source.family)


@dataclasses.dataclass(frozen=True)
class _Format:
  """How a format is resolved (path, a TF checkpoint's files, check_weights -> its config
  and records read), the headed model it records (`Pretrained.spec`), its tensors read, and
  those mapped to our params."""
  resolve: Callable[..., Pretrained]
  spec: Callable[[Pretrained], dict | None]
  read: Callable[[Pretrained], dict]
  params: Callable[[Pretrained, dict, str], tuple[dict, bool]]


FORMATS = {
    "native": _Format(_resolve_native, lambda s: s.recorded.get("model") or None,
                      lambda s: checkpoint.load_model_params(s.path, s.config)[1],
                      _native_params),
    "hf": _Format(_resolve_hf,
                  lambda s: hf.headed_spec_of(s.recorded, os.path.join(s.path, "config.json"),
                                            s.family),
                  lambda s: hf.normalize_names(hf_files.read_state(s.path), s.path,
                                               s.config.family),
                  _hf_params),
    "tf": _Format(_resolve_tf, lambda s: None, lambda s: tf_checkpoint.read_tensors(s.tf_prefix),
                  _tf_params),
}


def resolve(path: "str | Pretrained", check_weights: bool = True,
            hold: bool = False) -> Pretrained:
  """The pretrained model at `path` (an HF folder, a TF checkpoint folder or prefix, a
  bert_jax saved model or workdir, or a Hub id `org/name[@revision]` fetched into the
  Hub cache, `bert_jax.files.hub`): its format detected, its config, headed model and labels
  read once, and (check_weights) its weights files checked to be there and whole, so that a
  file cut short is a one-line error naming it before anything is trained. hold: keep the
  tensors once read (`Pretrained.hold`). A `Pretrained` is returned as it is."""
  if isinstance(path, Pretrained):
    return path
  path, fetched = hub.locate(path)
  path = readable_path(path)
  if fetched and hf_files.only_bin(path):
    raise ValueError(f"{fetched.repo_id}@{fetched.revision}: the Hub model has only "
                     "pytorch_model.bin; pickle files are not loaded. Convert it to "
                     f"model.safetensors first: python -m bert_jax.commands.convert "
                     f"--input={fetched.repo_id}@{fetched.revision} --output=NEW_FOLDER")
  fmt, tf_files = _detect(path)
  source = FORMATS[fmt].resolve(path, tf_files, check_weights, hub=fetched, hold=hold)
  check_vocab(source.folder, source.config)
  return source


def load_config(path: "str | Pretrained") -> BertConfig:
  """The model config of any supported format, without reading the weights."""
  return resolve(path, check_weights=False).config


def load_params(path: "str | Pretrained", heads: str = "auto") -> tuple[BertConfig, dict, bool]:
  """(config, unrolled float32 params, has_heads) from any supported format (has_heads: a
  native workdir's pretraining heads; an HF folder's heads of any kind)."""
  source = resolve(path)
  params, with_heads = source.load(heads)
  return source.config, params, with_heads


def readable_path(path: str) -> str:
  """A URL where its readers can read it: a bert_jax workdir or saved model in a bucket
  as it is (orbax and `bert_jax.files.storage` read it there); an HF folder or a TF
  checkpoint (folder or prefix) copied to a local folder first (storage.local_copy: their
  readers, safetensors and TensorFlow's, open local files)."""
  if not storage.is_url(path) or checkpoint.is_native(path):
    return path
  if storage.isdir(path):
    return storage.local_copy(path)
  if storage.exists(path + ".index"):  # a TF checkpoint prefix: its folder's files
    return os.path.join(storage.local_copy(storage.parent(path)), os.path.basename(path))
  raise FileNotFoundError(f"{path}: no such file or folder")


def check_vocab(path: str, config: BertConfig) -> None:
  """A vocab.txt beside the weights must have exactly vocab_size entries."""
  folder = path if storage.isdir(path) else storage.parent(path)
  vocab = storage.join(folder, "vocab.txt")
  if storage.exists(vocab):
    with storage.open_file(vocab) as f:
      entries = sum(1 for line in f if line.rstrip("\n"))
    if entries != config.vocab_size:
      raise ValueError(f"{vocab}: {entries} entries but the model's vocab_size is "
                       f"{config.vocab_size}")


def model_spec(path: "str | Pretrained", params: dict) -> dict:
  """The headed-model spec of a checkpoint: recorded in a bert_jax workdir's model_config.json
  or named by an HF folder's fine-tuning class; otherwise (HF/TF weights, older workdirs)
  read off the params: pretraining heads or encoder."""
  source = resolve(path)
  recorded = source.spec if source.format == "native" or "bert" in params else None
  if recorded and recorded["headed_model"] == "encoder" and "add_pooling_layer" not in recorded:
    # {"headed_model": "encoder"} alone would build the family's default pooler, started
    # fresh where the saved encoder had none: the params say which it was.
    return {**recorded, "add_pooling_layer": "pooler" in params.get("bert", params)}
  if recorded:
    return recorded
  if "rtd_head" in params:  # ELECTRA's discriminator
    return {"headed_model": "replaced_token_detection"}
  if "mlm_head" in params:
    return {"headed_model": "pretraining",
            "sentence_heads": sorted(k[:-len("_head")] for k in params
                                     if k.endswith("_head") and k != "mlm_head")}
  encoder = params.get("bert", params)
  return {"headed_model": "encoder", "add_pooling_layer": "pooler" in encoder}


def label_names(path: "str | Pretrained") -> list[str] | None:
  """The class names of a fine-tuned checkpoint's logits, in order: a bert_jax workdir's
  model_config.json "labels", an HF folder's id2label (when not transformers' LABEL_i)."""
  return resolve(path).labels


def load_pretrained(path: "str | Pretrained", heads: str = "auto", **config_overrides):
  """Loads weights from an HF folder, a TF checkpoint or a bert_jax checkpoint/workdir.

  Returns (model, variables): the module the checkpoint holds (`model_spec`), e.g.
  BertForPreTraining, BertModel, or a fine-tuned workdir's BertForSequenceClassification;
  heads="none" gives the encoder alone. config_overrides change implementation fields
  such as dtype="bfloat16" or scan_layers=True (params are then stacked to match).

  path: an HF model folder (config.json + weights) or Hub id, a TF checkpoint prefix
  (bert_model.ckpt beside bert_config.json), a bert_jax saved model or training workdir.

  ```python
  import tempfile
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size, load_pretrained
  from bert_jax.models.headed import BertForSequenceClassification
  from bert_jax.weights.checkpoint import save_model

  # A tiny classifier saved as a bert_jax model folder, then loaded back as it was.
  config = config_for_size("tiny", vocab_size=100)
  classifier = BertForSequenceClassification(config, num_labels=2)
  input_ids = jnp.ones((1, 8), jnp.int32)
  params = classifier.init(jax.random.key(0), input_ids)["params"]
  folder = tempfile.mkdtemp()
  save_model(folder, config, params,
             spec={"headed_model": "sequence_classification", "num_labels": 2})

  model, variables = load_pretrained(folder)  # an HF folder or TF checkpoint: the same call
  assert type(model).__name__ == "BertForSequenceClassification"
  logits = model.apply(variables, input_ids).logits
  assert jnp.allclose(logits, classifier.apply({"params": params}, input_ids).logits)
  encoder, encoder_variables = load_pretrained(folder, heads="none")
  assert type(encoder).__name__ == "BertModel"
  ```
  """
  source = resolve(path)
  config, params, _ = load_params(source, heads)
  spec = model_spec(source, params)
  if heads == "none" and spec["headed_model"] != "encoder":
    params = params.get("bert", params)
    spec = {"headed_model": "encoder", "add_pooling_layer": "pooler" in params}
  config = config.replace(**config_overrides)
  if config.scan_layers:
    params = stack_layers(params, *stacked_layout(config))
  params = jax.tree.map(lambda x: jnp.asarray(np.asarray(x, np.float32)), params)
  model = specs.build(config, spec)
  params, fresh = _init_absent(model, spec, params)
  if fresh:
    print(f"{source.path}: newly initialised {fresh} (not in the checkpoint; the model's own "
          "init, as HF's from_pretrained does)", flush=True)
  return model, {"params": params}


def _init_absent(model, spec: dict, params: dict) -> tuple[dict, list[str]]:
  """(params completed with what `model` has and the checkpoint lacks, started by the
  model's own init from key 0, the modules so started): HF's BertForMaskedLM,
  AlbertForMaskedLM, ErnieForMaskedLM hold no pooler, which the family's pretraining
  model has. The tensors the checkpoint does hold are kept as they are."""
  ids = jnp.zeros(hf.init_shape(spec["headed_model"]), jnp.int32)
  init = lambda: nn.unbox(model.init(jax.random.key(0), ids)["params"])  # noqa: E731
  ours = mapping.flatten(params)
  missing = sorted(set(mapping.flatten(jax.eval_shape(init))) - set(ours))
  if not missing:
    return params, []
  fresh = mapping.flatten(jax.jit(init)())
  ours.update({path: fresh[path] for path in missing})
  modules = sorted({"/".join(path.split("/")[:2 if path.startswith("bert/") else 1])
                    for path in missing})
  return mapping.unflatten(ours), modules
