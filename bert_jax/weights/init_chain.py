"""The trainer's init chain: a fresh run's params from init_from's weights, the frozen
params, re-initialised top layers and word vectors, in that order (`fresh_start`).

  params, notes = init_params(params, source, config)  # the trainer's config.init_from
  params, lines = fresh_start(config, get_params, model_config, source=source)

The weights themselves come from the loader (loader.py: `resolve`, `load_params`); this
module adapts them to the model a run builds (an encoder under a headed model, heads kept or
dropped, layers stacked) and says what it changed.
"""
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.core import optim
from bert_jax.files import storage
from bert_jax.models import headed
from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.layout import stack_layers, stacked_layout
from bert_jax.weights.loader import Pretrained, load_params, model_spec, resolve


def init_params(params: dict, path: "str | Pretrained", model_config: BertConfig):
  """(params with every tensor of the checkpoint at `path` copied in, notes on what was
  adapted): the trainer's config.init_from. `params` are the freshly initialised ones."""
  source = resolve(path)
  path = source.path
  pretrained_config, pretrained, _ = load_params(source)
  # A pretraining model of two networks passes on the one it names (ELECTRA: the
  # discriminator); the other (its generator) is dropped.
  part = getattr(headed.HEADED_MODELS.get(model_spec(source, pretrained)["headed_model"]),
                 "transfer_part", None)
  if part:
    pretrained = pretrained[part]
  if pretrained_config.vocab_size != model_config.vocab_size:
    raise ValueError(f"init_from {path}: vocab_size {pretrained_config.vocab_size} != "
                     f"config.model.vocab_size {model_config.vocab_size}")
  if model_config.scan_layers:
    pretrained = stack_layers(pretrained, *stacked_layout(model_config))
  with_head = _prediction_head_from(pretrained, params, model_config)
  params, notes = _merge(params, with_head, path)
  if with_head is not pretrained:
    notes.append(f"started the prediction head from the checkpoint's "
                 f"{family_of(model_config).prediction_head_from} transform (as HF does)")
  return params, notes


def _prediction_head_from(pretrained: dict, params: dict, model_config: BertConfig) -> dict:
  """A pretraining checkpoint's head transform as the prediction head's start, where the family
  says HF's from_pretrained does so (`Family.prediction_head_from`: ModernBERT's MLM head)."""
  source = family_of(model_config).prediction_head_from
  if not source or "head" not in params or "head" in pretrained or source not in pretrained:
    return pretrained
  head = pretrained[source]
  return {**pretrained, "head": {"dense": head["transform"],
                                 "layer_norm": head["transform_layer_norm"]}}


def _merge(params, pretrained, path: str):
  """Copies every tensor of `pretrained` into `params`; shapes and names must match.

  Adapts the usual encoder/task differences and says so: an encoder-only checkpoint goes
  under a headed model's `bert`; a pretraining checkpoint gives only its encoder to a
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
    pretrained = {"bert": pretrained}  # an encoder-only checkpoint under a headed model
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
