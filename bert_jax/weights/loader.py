"""The one weights loader: HF folders, Google TF checkpoints and bert_jax saved models /
training workdirs (pretrained or fine-tuned), for users and for the trainer alike (its
init chain, init_chain.py, starts from what this reads).

  source = resolve(path)                             # format and config, read once
  model, variables = load_pretrained(path)           # the model with the checkpoint's heads
  config, params, with_heads = load_params(source)   # unrolled float32 numpy params

A path is resolved once into a `Pretrained` (its format, model config, recorded headed
model and labels, its weights files checked to be present and whole); every function
here takes a path or a `Pretrained`, and a run passes the one it resolved.

A bert_jax workdir records its model in model_config.json ("model": a headed-model spec),
so a fine-tuned workdir loads as its headed model (classifier, tagger, QA, multiple choice)
with its head. HF and TF checkpoints load as BertForPreTraining (with the family's MLM
and sentence heads) or BertModel; an HF folder's config.json `model_type` picks the family
(see bert_jax/convert/hf_families.py); ELECTRA's discriminator folder loads as
BertForReplacedTokenDetection, and an HF fine-tuned folder whose head is ours (its
`architectures`: BertForSequenceClassification, RobertaForTokenClassification,
AlbertForQuestionAnswering, ...) as that headed model.
"""
import dataclasses
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.weights import checkpoint
from bert_jax.files import hub, storage
from bert_jax.convert import hf, mapping, tf_checkpoint
from bert_jax.files.hub import HubModel
from bert_jax.models import headed
from bert_jax.models.config import BertConfig
from bert_jax.models.layout import stack_layers, stacked_layout


def detect_format(path: str) -> str:
  """"native" (ours: saved model or training workdir), "hf" or "tf"."""
  if not storage.exists(path) and not tf_checkpoint.is_tf_checkpoint(path):
    raise FileNotFoundError(f"{path}: no such file or folder")
  if checkpoint.is_native(path):
    return "native"
  if tf_checkpoint.is_tf_checkpoint(path):
    return "tf"
  if os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")):
    return "hf"
  raise ValueError(f"{path}: not an HF folder (config.json + model.safetensors), a TF "
                   "checkpoint (bert_config.json + *.ckpt.index) or a bert_jax checkpoint")


@dataclasses.dataclass(frozen=True)
class Pretrained:
  """A pretrained model's path, resolved once (`resolve`): what every reader of it needs.

  format: "native" (ours: saved model or training workdir), "hf" or "tf".
  config: its model config.
  recorded: the config file as read (a native model_config.json, an HF config.json; None
    for a TF checkpoint), which `spec` and `labels` read.
  hub: what was fetched where the path was a Hub id (`bert_jax.files.hub`; `path` is then its
    snapshot folder), else None.
  """
  path: str
  format: str
  config: BertConfig
  recorded: dict | None = None
  hub: HubModel | None = None

  def spec(self) -> dict | None:
    """The headed model it records: a native model_config.json's "model", an HF folder's
    fine-tuning class (e.g. {"headed_model": "sequence_classification", "num_labels": 3});
    None: read it off the params (`model_spec`)."""
    if self.format == "native":
      return self.recorded.get("model") or None
    if self.format == "hf":
      return hf.headed_spec_of(self.recorded, os.path.join(self.path, "config.json"))
    return None

  def labels(self) -> list[str] | None:
    """Its class names in logit order, where it records them."""
    if self.format == "native":
      return self.recorded.get("labels")
    return hf.labels_of(self.recorded) if self.format == "hf" else None

  def load(self, heads: str = "auto") -> tuple[dict, bool]:
    """(unrolled float32 params, has_heads): reads the weights (only here)."""
    if self.format == "native":
      _, params = checkpoint.load_model_params(self.path, self.config)
      with_heads = "mlm_head" in params
      if heads == "none" and "bert" in params:
        return params["bert"], False
      if heads == "pretraining" and not with_heads:
        raise ValueError(f"{self.path}: has no pretraining heads")
      return params, with_heads
    if self.format == "hf":
      return hf.load_params(self.path, self.config, heads,
                            self.spec() if heads != "none" else None)
    return tf_checkpoint.load_params(self.path, self.config, heads)


def resolve(path: "str | Pretrained", check_weights: bool = True) -> Pretrained:
  """The pretrained model at `path` (an HF folder, a TF checkpoint folder or prefix, a
  bert_jax saved model or workdir, or a Hub id `org/name[@revision]` fetched into the
  Hub cache, `bert_jax.files.hub`): its format detected and its config read once, and
  (check_weights) its weights files checked to be there and whole, so that a file cut short
  is a one-line error naming it before anything is trained. A `Pretrained` is returned as
  it is."""
  if isinstance(path, Pretrained):
    return path
  path, fetched = hub.locate(path)
  path = readable_path(path)
  if fetched and hf.only_bin(path):
    raise ValueError(f"{fetched.repo_id}@{fetched.revision}: the Hub model has only "
                     "pytorch_model.bin; pickle files are not loaded. Convert it to "
                     f"model.safetensors first: python -m bert_jax.commands.convert "
                     f"--input={fetched.repo_id}@{fetched.revision} --output=NEW_FOLDER")
  fmt = detect_format(path)
  if fmt == "native":
    recorded = checkpoint.read_model_record(path)
    config = BertConfig.from_json_dict(
        recorded, source=os.path.join(path, checkpoint.MODEL_CONFIG))
    if check_weights:
      checkpoint.check_weights(path)
  elif fmt == "hf":
    recorded, config_path = hf.read_json(path)
    config = hf.config_from_json(recorded, config_path)
    if check_weights:
      hf.check_weights(path)
  else:
    recorded, config = None, tf_checkpoint.read_config(path)
  check_vocab(path, config)
  return Pretrained(path, fmt, config, recorded, fetched)


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
  recorded = source.spec() if source.format == "native" or "bert" in params else None
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
  return resolve(path).labels()


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
  model = headed.build(config, spec)
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
