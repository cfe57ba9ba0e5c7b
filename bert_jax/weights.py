"""The one weights loader: HF folders, Google TF checkpoints and bert_jax saved models /
training workdirs (pretrained or fine-tuned), for users and for the trainer alike.

  source = resolve(path)                             # format and config, read once
  model, variables = load_pretrained(path)           # the model with the checkpoint's heads
  config, params, with_heads = load_params(source)   # unrolled float32 numpy params
  params, notes = init_params(params, source, config)  # the trainer's config.init_from
  params, lines = fresh_start(config, get_params, model_config, source=source)

A path is resolved once into a `Pretrained` (its format, model config, recorded task
model and labels, its weights files checked to be present and whole); every function
here takes a path or a `Pretrained`, and a run passes the one it resolved.

A bert_jax workdir records its model in model_config.json ("model": a task_models spec),
so a fine-tuned workdir loads as its task model (classifier, tagger, QA, multiple choice)
with its head. HF and TF checkpoints load as BertForPreTraining (with the family's MLM
and sentence heads) or BertModel; an HF folder's config.json `model_type` picks the family
(see bert_jax/convert/hf_families.py); ELECTRA's discriminator folder loads as
BertForReplacedTokenDetection, and an HF fine-tuned folder whose head is ours (its
`architectures`: BertForSequenceClassification, RobertaForTokenClassification,
AlbertForQuestionAnswering, ...) as that task model.
"""
import dataclasses
import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax import checkpoint, hub, optim, storage
from bert_jax.convert import hf, mapping, tf_checkpoint
from bert_jax.hub import HubModel
from bert_jax.models import task_models
from bert_jax.models.families import family_of
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
  hub: what was fetched where the path was a Hub id (`bert_jax.hub`; `path` is then its
    snapshot folder), else None.
  """
  path: str
  format: str
  config: BertConfig
  recorded: dict | None = None
  hub: HubModel | None = None

  def spec(self) -> dict | None:
    """The task model it records: a native model_config.json's "model", an HF folder's
    fine-tuning class (e.g. {"task_model": "sequence_classification", "num_labels": 3});
    None: read it off the params (`model_spec`)."""
    if self.format == "native":
      return self.recorded.get("model") or None
    if self.format == "hf":
      return hf.task_spec_of(self.recorded, os.path.join(self.path, "config.json"))
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
  Hub cache, `bert_jax.hub`): its format detected and its config read once, and
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
                     f"model.safetensors first: python -m bert_jax.convert "
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
  as it is (orbax and `bert_jax.storage` read it there); an HF folder or a TF checkpoint
  (folder or prefix) copied to a local folder first (storage.local_copy: their readers,
  safetensors and TensorFlow's, open local files)."""
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
  """The task_models spec of a checkpoint: recorded in a bert_jax workdir's model_config.json
  or named by an HF folder's fine-tuning class; otherwise (HF/TF weights, older workdirs)
  read off the params: pretraining heads or encoder."""
  source = resolve(path)
  recorded = source.spec() if source.format == "native" or "bert" in params else None
  if recorded:
    return recorded
  if "rtd_head" in params:  # ELECTRA's discriminator
    return {"task_model": "replaced_token_detection"}
  if "mlm_head" in params:
    return {"task_model": "pretraining",
            "sentence_heads": sorted(k[:-len("_head")] for k in params
                                     if k.endswith("_head") and k != "mlm_head")}
  encoder = params.get("bert", params)
  return {"task_model": "encoder", "add_pooling_layer": "pooler" in encoder}


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
  """
  source = resolve(path)
  config, params, _ = load_params(source, heads)
  spec = model_spec(source, params)
  if heads == "none" and spec["task_model"] != "encoder":
    params = params.get("bert", params)
    spec = {"task_model": "encoder", "add_pooling_layer": "pooler" in params}
  config = config.replace(**config_overrides)
  if config.scan_layers:
    params = stack_layers(params, *stacked_layout(config))
  params = jax.tree.map(lambda x: jnp.asarray(np.asarray(x, np.float32)), params)
  model = task_models.build(config, spec)
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
  ids = jnp.zeros(hf.init_shape(spec["task_model"]), jnp.int32)
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


# ----------------------------------------------------------------- the trainer's init_from
def init_params(params: dict, path: "str | Pretrained", model_config: BertConfig):
  """(params with every tensor of the checkpoint at `path` copied in, notes on what was
  adapted): the trainer's config.init_from. `params` are the freshly initialised ones."""
  source = resolve(path)
  path = source.path
  pretrained_config, pretrained, _ = load_params(source)
  # A pretraining model of two networks passes on the one it names (ELECTRA: the
  # discriminator); the other (its generator) is dropped.
  part = getattr(task_models.TASK_MODELS.get(model_spec(source, pretrained)["task_model"]),
                 "transfer_part", None)
  if part:
    pretrained = pretrained[part]
  if pretrained_config.vocab_size != model_config.vocab_size:
    raise ValueError(f"init_from {path}: vocab_size {pretrained_config.vocab_size} != "
                     f"config.model.vocab_size {model_config.vocab_size}")
  if model_config.scan_layers:
    pretrained = stack_layers(pretrained, *stacked_layout(model_config))
  with_head = _task_head_from(pretrained, params, model_config)
  params, notes = _merge(params, with_head, path)
  if with_head is not pretrained:
    notes.append(f"started the task head from the checkpoint's "
                 f"{family_of(model_config).task_head_from} transform (as HF does)")
  return params, notes


def _task_head_from(pretrained: dict, params: dict, model_config: BertConfig) -> dict:
  """A pretraining checkpoint's head transform as the task head's start, where the family
  says HF's from_pretrained does so (`Family.task_head_from`: ModernBERT's MLM head)."""
  source = family_of(model_config).task_head_from
  if not source or "head" not in params or "head" in pretrained or source not in pretrained:
    return pretrained
  head = pretrained[source]
  return {**pretrained, "head": {"dense": head["transform"],
                                 "layer_norm": head["transform_layer_norm"]}}


def _merge(params, pretrained, path: str):
  """Copies every tensor of `pretrained` into `params`; shapes and names must match.

  Adapts the usual encoder/task differences and says so: an encoder-only checkpoint goes
  under a task model's `bert`; a pretraining checkpoint gives only its encoder to a
  fine-tuning model (its MLM/NSP heads are dropped); a pooler the model lacks (token
  tasks) is dropped. Heads the checkpoint lacks keep their fresh initialisation, and so do
  task heads whose shapes differ from the model's (a fine-tuned checkpoint of another
  label count, e.g. MNLI's 3 classes before RTE's 2: HF's ignore_mismatched_sizes).
  """
  def merge(ours, theirs, prefix):
    if not isinstance(theirs, dict):
      if ours.shape != theirs.shape:
        raise ValueError(f"init_from {path}: {prefix} has shape {theirs.shape}, the model "
                         f"expects {ours.shape}")
      return jnp.asarray(theirs, ours.dtype)
    unknown = set(theirs) - set(ours)
    if unknown:
      raise ValueError(f"init_from {path}: {prefix or 'params'} has no {sorted(unknown)}")
    return {k: merge(ours[k], theirs[k], f"{prefix}/{k}" if prefix else k) if k in theirs
            else ours[k] for k in ours}

  notes = []
  if "bert" in params and "bert" not in pretrained:
    pretrained = {"bert": pretrained}  # an encoder-only checkpoint under a task model
  dropped = sorted(set(pretrained) - set(params))
  if "bert" in params and dropped:
    pretrained = {k: v for k, v in pretrained.items() if k in params}
    notes.append(f"dropped the checkpoint's {dropped}")
  mismatched = [head for head in sorted(set(pretrained) & set(params) - {"bert"})
                if _shapes(pretrained[head]) != _shapes(params[head])]
  for head in mismatched:
    notes.append(f"newly initialised {head}: the checkpoint's has the shapes "
                 f"{_shapes(pretrained[head])}, the model's {_shapes(params[head])}")
  pretrained = {k: v for k, v in pretrained.items() if k not in mismatched}
  encoder, theirs = params.get("bert", params), pretrained.get("bert", pretrained)
  if "pooler" in theirs and "pooler" not in encoder:
    theirs = {k: v for k, v in theirs.items() if k != "pooler"}
    pretrained = {**pretrained, "bert": theirs} if "bert" in pretrained else theirs
    notes.append("dropped the checkpoint's pooler (the model has none)")
  fresh = sorted(set(params) - set(pretrained) - set(mismatched))
  if "bert" in params:  # e.g. the pooler a classifier adds to a RoBERTa/DistilBERT encoder
    fresh += [f"bert/{k}" for k in sorted(set(params["bert"]) - set(pretrained["bert"]))]
  if fresh:
    notes.append(f"newly initialised {fresh}")
  return merge(params, pretrained, ""), notes


def _shapes(tree) -> dict:
  """{"dense/kernel": (768, 3), ...}: the shapes of a params subtree, by path."""
  if not isinstance(tree, dict):
    return {"": tuple(np.shape(tree))}
  return dict(sorted((f"{k}/{path}".rstrip("/"), shape) for k, sub in tree.items()
                     for path, shape in _shapes(sub).items()))


def init_word_vectors(params: dict, path: str, model_config: BertConfig, std: float = 0.0):
  """(params with every word-embedding table started from the vectors at `path`, notes):
  the trainer's config.init_word_vectors, for a fresh run.

  `path` is an .npz of bert_jax.pretrain.word_vectors (vectors [V, E], counts [V]). The rows
  of pieces that occur (counts > 0) are rescaled so that their standard deviation is `std`
  (config.init_word_vectors_std; 0: the fresh table's, the model's own initial scale); the
  other rows keep their fresh values.
  """
  if std < 0:
    raise ValueError(f"config.init_word_vectors_std={std}: must be >= 0 (0: the fresh "
                     f"table's std)")
  try:
    with np.load(storage.local_copy(path)) as data:
      vectors, counts = data["vectors"], data["counts"]
  except (OSError, KeyError, ValueError) as e:
    raise ValueError(f"init_word_vectors {path}: not a word-vector .npz with vectors and "
                     f"counts ({e})") from None
  if vectors.shape[0] != model_config.vocab_size or counts.shape != (vectors.shape[0],):
    raise ValueError(f"init_word_vectors {path}: {vectors.shape[0]} vectors for "
                     f"config.model.vocab_size {model_config.vocab_size}")
  seen = counts > 0
  if not seen.any():
    raise ValueError(f"init_word_vectors {path}: no piece occurs (every count is 0)")
  found = []

  def start(tree, prefix):
    if not isinstance(tree, dict):
      return tree
    out = {}
    for key, value in tree.items():
      name = f"{prefix}/{key}" if prefix else key
      if key == "word_embeddings" and isinstance(value, dict) and "embedding" in value:
        table = np.asarray(value["embedding"])
        if table.shape != vectors.shape:
          raise ValueError(f"init_word_vectors {path}: vectors {vectors.shape}, {name} "
                           f"{table.shape} (the vectors' size must be the embedding width)")
        rows = vectors[seen].astype(np.float64)
        scale = (std or table.std()) / max(rows.std(), 1e-12)
        table = table.copy()
        table[seen] = rows * scale
        out[key] = {**value, "embedding": jnp.asarray(table, value["embedding"].dtype)}
        found.append(name)
      else:
        out[key] = start(value, name)
    return out

  params = start(params, "")
  if not found:
    raise ValueError(f"init_word_vectors {path}: the model has no word_embeddings table")
  return params, [f"{', '.join(found)}: {int(seen.sum())} of {len(seen)} rows from {path}"]


# ---------------------------------------------------------- the trainer's fresh-run start
def fresh_start(config, get_params, model_config: BertConfig, frozen=None, frozen_host=None,
                source: Pretrained | None = None):
  """(params to start a fresh run from, or None to keep the fresh init; the lines to
  print): the trainer's init chain, in order

    init_from's weights (none with config.random_init: its architecture and vocabulary
    only) or, without init_from, the frozen params' init_trainable (a distillation
    student from its teacher's layers) -> config.init_word_vectors over the word table.

  get_params() gives the fresh host params (called only when something changes them);
  frozen is the task's FrozenParams (task.frozen_params()), frozen_host their host params;
  source: config.init_from resolved (`resolve`; resolved here when not given).
  """
  if config.get("init_word_vectors") and config.init_from and not config.get("random_init"):
    raise ValueError("config.init_word_vectors: init_from's weights bring their own word "
                     "embeddings; set random_init=true or leave init_from empty")
  params, lines = None, []
  if config.init_from and config.get("random_init"):
    lines.append(f"Random initialisation (config.random_init): the architecture and "
                 f"vocabulary of {config.init_from}, not its weights")
  elif config.init_from:
    source = resolve(source or config.init_from)
    params, notes = init_params(get_params(), source, model_config)
    if source.hub:
      notes.insert(0, source.hub.describe())
    lines.append(f"Initialised from {config.init_from}" + _notes(notes))
    new = [note for note in notes if note.startswith("newly initialised")]
    evaluate_only = (config.get("num_train_steps", 1) == 0
                     and config.get("num_train_epochs", 1) == 0)  # fine-tuning's eval-only
    if new and evaluate_only:
      raise ValueError(f"config.num_train_epochs=0 evaluates init_from {config.init_from} as it "
                       f"is, but the model would have {new[0]}: init_from must be a model "
                       "fine-tuned for this task (its head and label count)")
  elif frozen is not None and frozen.init_trainable is not None:
    params, notes = frozen.init_trainable(get_params(), frozen_host)
    lines.append("Initialised from the frozen params" + _notes(notes))
  if int(config.get("reinit_layers", 0)):
    if params is None or not config.init_from:
      raise ValueError(f"config.reinit_layers={config.reinit_layers}: it re-initialises "
                       "layers of init_from's weights; set init_from and random_init=false")
    params, note = reinit_top_layers(params, get_params(), int(config.reinit_layers))
    lines.append(f"Re-initialised (config.reinit_layers): {note}")
  if config.get("init_word_vectors"):
    params, notes = init_word_vectors(get_params() if params is None else params,
                                      config.init_word_vectors, model_config,
                                      float(config.get("init_word_vectors_std", 0.0)))
    lines.append(f"Word embeddings from {config.init_word_vectors} ({'; '.join(notes)})")
  return params, lines


def reinit_top_layers(params: dict, fresh: dict, count: int) -> tuple[dict, str]:
  """(params with the top `count` encoder layers taken from `fresh`, a one-line note):
  re-initialising the layers nearest the pretraining heads before fine-tuning (Zhang et
  al. 2021, "Revisiting few-sample BERT fine-tuning"). Layers are `bert/encoder/layer_i`
  or the stacked `bert/encoder/layers` (optim.layer_depths; a shared ALBERT layer is
  refused there); everything else keeps its loaded value."""
  num_layers, depths = optim.layer_depths(fresh)
  if not 0 < count <= num_layers:
    raise ValueError(f"config.reinit_layers={count}: expected 1 to the encoder's "
                     f"{num_layers} layers")
  first = num_layers - count  # layers first .. L-1 are re-initialised

  def pick(path, loaded, new):
    depth = depths.get("/".join(optim.path_names(path)))
    if isinstance(depth, np.ndarray):  # stacked layers: depth i + 1 for layer i
      fresh_rows = (depth > first).reshape(depth.shape + (1,) * (np.ndim(loaded) - 1))
      return np.where(fresh_rows, np.asarray(new), np.asarray(loaded))
    if isinstance(depth, int) and depth > first:  # depth i + 1 for layer_i
      return new
    return loaded

  params = jax.tree_util.tree_map_with_path(pick, params, fresh)
  layers = ", ".join(f"layer_{i}" for i in range(first, num_layers))
  return params, f"{layers} of {num_layers} from the fresh init"


def _notes(notes) -> str:
  return f" ({'; '.join(notes)})" if notes else ""
