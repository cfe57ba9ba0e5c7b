"""What every fine-tuning task shares (bert_jax/core/task.py's contract).

Each fine-tuning task (config.task: glue, conll, squad, swag) is one reader module
(`<task>_reader.py`: jax-free reading, featurizing and official scoring) and one task
module (`<task>.py`: the model spec, which of its
features the model reads, its loss as additive sums so gradient accumulation stays exact,
scoring and predictions), a small class over `FinetuningTask`, which owns the rest:
reading the splits through the reader's `load_split`, batching them (ArrayInput),
gathering eval outputs. classify.py, tag.py and qa.py are GLUE's, CoNLL's and SQuAD's tasks
on the user's own files (their readers inside them).

config.data fields read here: data_dir, sources ({split: source}), train_split,
eval_split, train_examples (0 = all; else a fixed random subset), max_seq_length,
pad_to_multiple_of (training batches padded only to their longest row, rounded up to
this; 0 = always max_seq_length), packing (training rows hold up to this many examples,
-1 = as many as fit, 0 = off; tasks with `packable`: GLUE, CoNLL; batch_size then counts
packed rows; bert_jax/finetune/example_packing.py), pack_each_batch (instead: each batch keeps
batch_size examples, in unpacked training's order, packed into as few full-length rows
as fit, rounded up to a multiple of packed_rows_multiple: example_packing.PackedBatches),
select_fraction (training examples held back to pick the epoch, whole `row_groups` at a
time: TaskInputs.select; tasks with a `select_metric`: GLUE, SWAG), batch_size,
eval_batch_size, seed, plus each task's own (GLUE: dataset, heldout_fraction,
heldout_seed; SQuAD: doc_stride, max_query_length, version_2_with_negative,
heldout_fraction, heldout_seed). predict_split: with config.predict, a split of `sources`
(an unlabelled test file) whose predictions are written beside the eval split's scores
(TaskInputs.predict; "" or no source: none). shards: "" reads the sources; else the
prefix of the splits' pre-tokenized files, read instead (finetune/shards.py: no
TensorFlow). The tokenizer is the run's one (bert_jax/text/tokenizers.py).
"""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.core import flops, optim
from bert_jax.finetune import array_input, example_packing, feature_cache, shards, sources
from bert_jax.models import features, specs
from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.core.task import Evaluation, TaskInputs

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
# A per-token eval output at a padding position: never the best score (SQuAD's spans), and
# what cut eval batches' per-token outputs are padded back with (sequence_outputs).
PADDING_OUTPUT = float(np.finfo(np.float32).min)


# config fields that change a fine-tuning head -> their default (configs/common.py).
HEAD_OPTIONS = {"feature_layers": "", "freeze_encoder": False, "classifier_pooling": "pooler",
                "feature_mix": "concat", "feature_head": "linear", "trainable_layers": ""}


def layer_list(config, field: str) -> tuple[int, ...]:
  """config.<field> "-4,-3,-2,-1" -> (-4, -3, -2, -1); "" -> ()."""
  spec = config.get(field, "")
  try:
    return tuple(int(x) for x in spec.split(",")) if spec else ()
  except ValueError:
    raise ValueError(f"config.{field}={spec!r}: expected comma-separated layer "
                     "indices like -4,-3,-2,-1") from None


def feature_layers(config) -> tuple[int, ...]:
  """The hidden layers a feature-based head reads (config.feature_layers; () fine-tunes)."""
  return layer_list(config, "feature_layers")


def trainable_layers(config) -> tuple[int, ...]:
  """The encoder depths that still train when config.freeze_encoder freezes the rest
  (config.trainable_layers: 0 embeddings, i layer i, -1 the top; optim.frozen_labels)."""
  return layer_list(config, "trainable_layers")


def feature_spec(config) -> dict:
  """The feature-based fields of a tagger's / classifier's model spec (models/headed.py)."""
  layers = feature_layers(config)
  mix, head = config.get("feature_mix", "concat"), config.get("feature_head", "linear")
  features.check_choice(features.FEATURE_MIXES, "feature_mix", mix)
  features.check_choice(features.TOKEN_FEATURE_HEADS, "feature_head", head)
  for field, value, default in (("feature_mix", mix, "concat"), ("feature_head", head, "linear")):
    if value != default and not layers:
      raise ValueError(f"config.{field}={value!r} reads config.feature_layers, which is "
                       "empty; name the hidden layers (e.g. -4,-3,-2,-1; 0 = embeddings)")
  return {"feature_layers": list(layers), "feature_mix": mix, "feature_head": head,
          "frozen_encoder": bool(config.freeze_encoder) and not trainable_layers(config)}


class FinetuningTask:
  """What every fine-tuning task shares. Subclasses set the class attributes below and
  define model_spec, loss_sums and score (+ write_predictions)."""

  name = ""
  reader = None  # the task's reader module (bert_jax.finetune.<task>_reader)
  label_keys: tuple[str, ...] = ()  # batch features the loss reads besides MODEL_INPUTS
  metric_names = ("loss", "accuracy")
  packable = False  # labels per example or per token: training rows can pack several
  # The head options (HEAD_OPTIONS) the task's model reads; others must stay at their default.
  head_options: tuple[str, ...] = ("freeze_encoder", "trainable_layers")
  select_metric = None  # the score that picks the epoch (config.data.select_fraction)
  label_names = None  # the logits' classes, in order (Task.label_names)
  counts_in_steps = False  # num_train_epochs of the task's data may set the run's length
  source = None  # config.init_from resolved (Task.source; set by the registry's make_task)
  sequence_outputs: tuple[str, ...] = ()  # eval outputs with a per-token axis 1 ([B, T, ...])
  # The dataclass of a split's examples (its metadata's records): the task's shard form
  # (config.data.shards, finetune/shards.py); None: the task has none.
  example_type = None

  def __init__(self, config, model_config: BertConfig):
    self.config, self.model_config = config, model_config
    for field, default in HEAD_OPTIONS.items():
      if field not in self.head_options and config.get(field, default) != default:
        raise ValueError(f"config.{field}={config.get(field)!r}: the {self.name} task's model "
                         f"does not read it (its options: {', '.join(self.head_options)}); "
                         f"leave it at {default!r}")
    layers = trainable_layers(config)
    if layers and not config.get("freeze_encoder"):
      raise ValueError(f"config.trainable_layers={config.trainable_layers!r}: names the "
                       "layers that train in a frozen encoder; set config.freeze_encoder=true")
    if config.data.get("packing") and not self.packable:
      raise ValueError(f"config.data.packing={config.data.packing}: the {self.name} task has "
                       "no packed form (GLUE and CoNLL have); set it to 0")
    if config.data.get("pack_each_batch") and not self.packable:
      raise ValueError(f"config.data.pack_each_batch: the {self.name} task has no packed form "
                       "(GLUE and CoNLL have); set it to False")
    family = family_of(model_config)
    for field in ("packing", "pack_each_batch"):
      if config.data.get(field) and not family.packed_rows:
        raise ValueError(f"config.data.{field}: the {model_config.family} family's attention "
                         "takes no packed rows (segment ids); set "
                         f"--config.data.{field}={0 if field == 'packing' else 'false'} "
                         "(padded rows, the same losses)")
    fraction = config.data.get("select_fraction") or 0.0
    if not 0.0 <= fraction < 1.0:
      raise ValueError(f"config.data.select_fraction={fraction}: must be in [0, 1)")
    if fraction and self.select_metric is None:
      raise ValueError(f"config.data.select_fraction={fraction}: the {self.name} task cannot "
                       "hold back training examples to pick the epoch (GLUE and SWAG can); set it "
                       "to 0")
    feature_cache.check(config)
    if config.data.get("shards"):
      self.check_shardable()
    if config.data.get("pack_each_batch") and config.data.get("packing"):
      raise ValueError(f"config.data.pack_each_batch (GLUE's and CoNLL's default) with "
                       f"config.data.packing={config.data.packing}: choose one (packing packs "
                       "the whole training set, batch_size then counting rows; "
                       "--config.data.pack_each_batch=false)")

  def build_model(self):
    return specs.build(self.model_config, self.model_spec())

  # --- data ------------------------------------------------------------------------
  def load_split(self, split, tokenizer):
    return self.reader.load_split(self.config.data, split, tokenizer,
                                  self.config.data.max_seq_length)

  def split_data(self, split, tokenizer):
    """(features, metadata) of `split`: its source read and featurized (load_split), or its
    file under config.data.shards, written so before (finetune/shards.py)."""
    if not self.config.data.get("shards"):
      return self.load_split(split, tokenizer)
    features, rows, meta = shards.read_split(self.config, split, tokenizer)
    self._shard_notes.extend(n for n in meta["data_notes"] if n not in self._shard_notes)
    return features, self.examples_of(rows, features)

  def make_inputs(self, tokenizer, process_index: int, process_count: int) -> TaskInputs:
    data = self.config.data
    train_features, train_metadata = self.split_data(data.train_split, tokenizer)
    eval_features, eval_metadata = self.split_data(data.eval_split, tokenizer)
    keep = MODEL_INPUTS + self.label_keys
    predict_split = self.predict_split()
    predict_features, predict_metadata = (self.split_data(predict_split, tokenizer)
                                          if predict_split else (None, None))
    caching = bool(self.config.get("cache_features"))
    if caching:  # each example's number in its split: where its cached layers are
      for split_features in filter(None, (train_features, eval_features, predict_features)):
        split_features["example_id"] = np.arange(len(split_features["input_ids"]))
      keep += ("example_id",)
    rows = np.arange(len(train_features["input_ids"]))
    if data.train_examples:  # a fixed random subset, for quick runs and curves
      rows = np.sort(np.random.default_rng(data.seed).permutation(rows)[:data.train_examples])
    select = select_metadata = None
    if data.get("select_fraction"):  # held back from the subset: they pick the epoch
      count = max(1, round(data.select_fraction * len(rows)))
      if count >= len(rows):
        raise ValueError(f"config.data.select_fraction={data.select_fraction} of "
                         f"{len(rows)} training examples leaves none to train on")
      groups = self.row_groups(train_metadata)
      held = sources.heldout_mask(len(rows), count, [data.seed, 1],
                                  None if groups is None else groups[rows])
      if held.all():
        raise ValueError(f"config.data.select_fraction={data.select_fraction} holds back "
                         f"all {len(rows)} training examples (whole groups: row_groups)")
      select_rows, rows = rows[held], rows[~held]
      select_metadata = [train_metadata[i] for i in select_rows]
      select_features = {k: v[select_rows] for k, v in train_features.items()}
      select = array_input.ArrayInput(
          select_features, data.eval_batch_size,
          shuffle=False, process_index=process_index, process_count=process_count,
          pad_to_multiple_of=data.pad_to_multiple_of,
          name=f"{self.name} {data.train_split} (held back to pick the epoch)")
    train_features = {k: train_features[k][rows] for k in keep}
    if data.get("packing"):
      train_features = example_packing.pack(train_features, data.packing, pad_id=tokenizer.pad_id)
    if data.get("pack_each_batch"):
      # Rows split evenly into grad_accum_steps micro-batches, each over the local devices.
      rows_multiple = math.lcm(int(data.packed_rows_multiple),
                               int(self.config.grad_accum_steps) * jax.local_device_count())
      train = example_packing.PackedBatches(train_features, data.batch_size, data.seed,
                                    process_index=process_index, process_count=process_count,
                                    rows_multiple=rows_multiple,
                                    pad_id=tokenizer.pad_id,
                                    name=f"{self.name} {data.train_split}")
    else:
      train = array_input.ArrayInput(train_features, data.batch_size, data.seed,
                                     process_index=process_index, process_count=process_count,
                                     pad_to_multiple_of=data.pad_to_multiple_of,
                                     name=f"{self.name} {data.train_split}")
    unshuffled = lambda features, split: array_input.ArrayInput(
        features, data.eval_batch_size, shuffle=False, process_index=process_index,
        process_count=process_count, pad_to_multiple_of=data.pad_to_multiple_of,
        name=f"{self.name} {split}")
    evaluation = unshuffled(eval_features, data.eval_split)
    predict = None if predict_features is None else unshuffled(predict_features, predict_split)
    if caching:  # the frozen encoder run once per example, here, not in every step
      encoder = feature_cache.FrozenEncoder(self, self.source)
      train = feature_cache.CachedLayers(train, encoder.encode(train_features, data.train_split))
      evaluation = feature_cache.CachedLayers(
          evaluation, encoder.encode(eval_features, data.eval_split))
      if select is not None:
        select = feature_cache.CachedLayers(select, encoder.encode(select_features, "held-back"))
      if predict is not None:
        predict = feature_cache.CachedLayers(predict,
                                             encoder.encode(predict_features, predict_split))
    return TaskInputs(train=train, eval=evaluation, steps_per_epoch=train.steps_per_epoch,
                      eval_metadata=eval_metadata,
                      width_examples=tuple(train.width_examples()), select=select,
                      select_metadata=select_metadata,
                      select_metric=self.select_metric if select is not None else None,
                      predict=predict, predict_metadata=predict_metadata,
                      data_notes=self.data_notes())

  @functools.cached_property
  def _skips(self) -> list[sources.Skips]:
    """The Skips of every file the task has read (`skips`)."""
    return []

  def data_notes(self) -> tuple[str, ...]:
    """One line per file read whose bad records were skipped (TaskInputs.data_notes)."""
    return tuple(filter(None, (s.note() for s in self._skips))) + tuple(self._shard_notes)

  @functools.cached_property
  def _shard_notes(self) -> list[str]:
    """The notes of bad rows skipped when the shard files read were written."""
    return []

  def skips(self, path: str, unit: str = "rows") -> sources.Skips:
    """A Skips for one of the user's files (config.data.skip_bad_rows), whose note joins
    the run report (TaskInputs.data_notes)."""
    skips = sources.Skips(path, bool(self.config.data.get("skip_bad_rows")), unit)
    self._skips.append(skips)
    return skips

  def predict_split(self) -> str | None:
    """The split of config.data.predict_split to predict (config.predict), if it has a
    source; None: only the eval split is predicted."""
    data = self.config.data
    split = data.get("predict_split") or ""
    if not (self.config.get("predict") and split and (data.get("sources") or {}).get(split)):
      return None
    return split

  # --- shards (finetune/shards.py) ----------------------------------------------------
  def check_shardable(self) -> None:
    if self.example_type is None:
      raise ValueError(f"config.data.shards: the {self.name} task has no shard form (glue, "
                       "classify, conll, tag and swag have); leave it empty")

  def examples_record(self, metadata) -> list[dict]:
    """A split's metadata as JSON-able records (its shard file's "examples")."""
    return shards.records(metadata)

  def examples_of(self, rows: list[dict], features: dict):
    """examples_record's inverse: the metadata load_split gives, from the records."""
    del features
    return shards.from_records(self.example_type, rows)

  def shard_state(self) -> dict:
    """What the task derived from its files besides the splits (classify: the problem and
    labels), kept in each shard file's meta."""
    return {}

  def row_groups(self, train_metadata):
    """[rows] group ids that a held-back split keeps on one side (None: rows apart)."""
    del train_metadata
    return None

  def example_batch(self, batch_size: int):
    """Zeros of a training batch's shapes (unpacked rows of max_seq_length), for init and
    compile-only runs: the model inputs and the label fields the loss reads."""
    return {**self.example_inputs(batch_size), **self.example_labels(batch_size)}

  def example_inputs(self, batch_size: int):
    t = self.config.data.max_seq_length
    batch = {k: jnp.zeros((batch_size, t), jnp.int32) for k in MODEL_INPUTS}
    batch["attention_mask"] = jnp.ones((batch_size, t), jnp.int32)
    return batch

  def example_labels(self, batch_size: int):
    """One int32 per example for each of label_keys; tasks with other labels override."""
    return {k: jnp.zeros((batch_size,), jnp.int32) for k in self.label_keys}

  # --- model -----------------------------------------------------------------------
  def freeze(self, tx):
    """tx; with config.freeze_encoder, tx holding the encoder's params but those of
    config.trainable_layers (no update, no weight decay, no optimizer state)."""
    if not self.config.get("freeze_encoder"):
      return tx
    return optim.freeze(tx, trainable_layers(self.config))

  def frozen_params(self):
    return None  # fine-tuning trains every param it reads

  def forward(self, model, params, batch, *, deterministic: bool, rng=None, frozen=None):
    del frozen
    if self.config.get("freeze_encoder"):  # no backward pass through the frozen params
      params = optim.stop_frozen_gradients(params, trainable_layers(self.config))
    rngs = None if deterministic else {"dropout": rng}
    packed = ({"packing": {k: batch[k] for k in example_packing.PACKING_KEYS}}
              if "segment_ids" in batch else {})  # packed training rows: [B, K] outputs
    cached = ({"cached_layers": batch["cached_layers"]} if "cached_layers" in batch
              else {})  # the frozen encoder's layers, computed before (feature_cache.py)
    return model.apply({"params": params}, *(batch[k] for k in MODEL_INPUTS),
                       deterministic=deterministic, rngs=rngs, **packed, **cached)

  def eval_outputs(self, outputs, batch):
    """What the host collects per eval batch: the logits, and which rows are real."""
    return {"logits": outputs.logits, "valid": batch["valid"]}

  # --- loss (sums over examples, divided by the whole batch's denominators) ---------
  def denominators(self, batch):
    if "example_mask" in batch:  # packed rows: the examples in them
      return {"examples": jnp.maximum(jnp.sum(batch["example_mask"]), 1.0)}
    return {"examples": jnp.float32(batch["input_ids"].shape[0])}

  def loss(self, sums, denominators):
    return sums["loss"] / denominators["examples"]

  def metrics(self, sums, denominators):
    return {k: v / denominators["examples"] for k, v in sums.items()}

  # --- evaluation --------------------------------------------------------------------
  def evaluate(self, run_eval, inputs: TaskInputs) -> Evaluation:
    """Runs every eval batch; scores the outputs of the real rows, concatenated. With a
    predict split, its outputs join them, prefixed `predict_` (unscored)."""
    outputs = self.run_outputs(run_eval, inputs.eval)
    if inputs.predict is not None:
      outputs.update({f"predict_{k}": v
                      for k, v in self.run_outputs(run_eval, inputs.predict).items()})
    return Evaluation(metrics=self.score(outputs, inputs.eval_metadata), outputs=outputs)

  def run_outputs(self, run_eval, split_input) -> dict[str, np.ndarray]:
    """The eval outputs of every real row of an unshuffled input, in order."""
    chunks = []
    for local in split_input.epoch_batches(0):
      out = jax.device_get(run_eval(local))
      valid = out.pop("valid").astype(bool)
      chunks.append({k: v[valid] for k, v in out.items()})
    chunks = array_input.pad_sequence_outputs(chunks, self.sequence_outputs,
                                              self.config.data.max_seq_length, PADDING_OUTPUT)
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}

  def score(self, outputs, eval_metadata) -> dict:
    raise NotImplementedError

  def write_predictions(self, evaluation, inputs, workdir: str) -> str | None:
    return None

  # --- bookkeeping -------------------------------------------------------------------
  def step_flops(self, batch) -> float:
    """Training FLOPs of the encoder on this (global) batch; heads are negligible. A trained
    encoder costs forward and backward (3x); a frozen one (config.freeze_encoder: the
    feature-based runs) its forward pass, plus the backward (2x) of the layers from the
    lowest of its trainable_layers up (all of them when the embeddings train); none with
    cached layers (config.cache_features: the encoder ran once, before training)."""
    if "cached_layers" in batch:
      return 0.0
    rows, seq_len = int(np.prod(batch["input_ids"].shape[:-1])), batch["input_ids"].shape[-1]
    passes = 3.0
    if self.config.get("freeze_encoder"):
      depth = self.model_config.num_hidden_layers
      lowest = min((d % (depth + 1) for d in trainable_layers(self.config)), default=depth + 1)
      passes = 1.0 + 2.0 * min(1.0, (depth + 1 - lowest) / depth)
    return passes * flops.encoder_forward_flops(self.model_config, rows, seq_len)

  def tokens(self, batch) -> int:
    return int(batch["input_ids"].size)
