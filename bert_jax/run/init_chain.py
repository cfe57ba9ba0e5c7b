"""The trainer's init chain: a fresh run's params from init_from's weights, the frozen
params, re-initialised top layers and word vectors, in that order (`fresh_start`).

  params, lines = fresh_start(config, get_params, model_config, source=source)

init_from's weights come from the weights package (`weights.init_params`, which adapts
the checkpoint's tensors to the model the run builds); this module orders the steps of a
fresh start and says what each changed.
"""
import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.core import optim
from bert_jax.files import storage
from bert_jax.models.config import BertConfig
from bert_jax.weights import Pretrained, init_params, resolve


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
