"""Cached features for a wholly frozen encoder (config.cache_features): the feature_layers'
hidden states computed once per example before training, train and eval alike, and the
head trained on them, instead of the encoder re-run on every batch of every epoch.

  check(config)                                   # one-line errors, before any data is read
  encoder = FrozenEncoder(task, task.source)      # init_from's encoder, as the run starts it
  train = CachedLayers(train, encoder.encode(train_features))
  next(train)["cached_layers"]                    # [B, W, K, H], W the batch's width

The feature arrays carry "example_id" (each example's number in its split), which finds
its layers in the store; the batches lose it and gain "cached_layers", which the headed
models read instead of running the encoder (models/headed.py: `cached_layers=`). Each example's
real tokens (attention_mask) are stored, in the encoder's dtype, flat; positions past
them read zeros, which no head reads (their labels weigh 0, the BiLSTM and the means stop
at the mask).

The same losses and metrics as the uncached frozen run (tests/test_feature_cache.py), but
for one difference by construction: the layers are the encoder's deterministic ones, so
the encoder's dropout (model.hidden_dropout_prob, attention_probs_dropout_prob) is off
where an uncached run trains with it on; the head's dropout is unchanged. Step FLOPs
count the head only (the encoder's one pass is not a training step's).
Shape legend: N examples, B batch, T sequence length, W a batch's width, K the
feature_layers, H hidden size.
"""
import dataclasses
import time

import flax.linen as nn
import jax
import numpy as np

from bert_jax import weights
from bert_jax.models.bert import BertModel

ENCODE_BATCH = 64  # rows per encoder call; batches of similar lengths, widths rounded up


def check(config) -> None:
  """One-line errors for a config.cache_features that cannot stand for the frozen run."""
  if not config.get("cache_features"):
    return
  if not config.get("freeze_encoder") or config.get("trainable_layers"):
    raise ValueError("config.cache_features caches a wholly frozen encoder's layers: set "
                     "config.freeze_encoder=true and leave config.trainable_layers empty")
  if not config.get("feature_layers"):
    raise ValueError("config.cache_features caches config.feature_layers, which is empty; "
                     "name the hidden layers the head reads (e.g. -4,-3,-2,-1)")
  if not config.init_from or config.get("random_init") or config.get("reinit_layers"):
    raise ValueError("config.cache_features computes init_from's encoder layers before "
                     "training: set config.init_from, with random_init and reinit_layers off")
  if config.get("init_word_vectors"):
    raise ValueError("config.init_word_vectors: init_from's weights bring their own word "
                     "embeddings, which config.cache_features computes the layers of; leave "
                     "init_word_vectors empty")
  for field in ("packing", "pack_each_batch"):
    if config.data.get(field):
      raise ValueError(f"config.data.{field}: cached features (config.cache_features) are "
                       "read one example per row; set it to 0 / false")


@dataclasses.dataclass(frozen=True)
class LayerStore:
  """Each example's K layers at its real tokens: values [sum of lengths, K, H], from row
  starts[slot[example_id]], lengths[...] long."""
  values: np.ndarray
  starts: np.ndarray
  lengths: np.ndarray
  slot: np.ndarray  # example_id -> its row here (-1: not stored)

  def gather(self, example_ids: np.ndarray, width: int) -> np.ndarray:
    """[B, width, K, H]: the examples' layers, zeros past their real tokens."""
    out = np.zeros((len(example_ids), width) + self.values.shape[1:], self.values.dtype)
    for row, slot in enumerate(self.slot[example_ids]):
      if slot < 0:
        raise KeyError(f"example {example_ids[row]} has no cached layers")
      count = min(int(self.lengths[slot]), width)
      out[row, :count] = self.values[self.starts[slot]:self.starts[slot] + count]
    return out


class FrozenEncoder:
  """The run's encoder as the trainer starts it (init_from's weights, `weights.init_params`;
  `check` leaves no other step of the start: no random_init, no reinit_layers; it never
  changes, being frozen), giving the headed model's feature_layers. source: init_from as the
  run resolved it (`Task.source`; resolved here when None), whose weights it reads."""

  def __init__(self, task, source: weights.Pretrained | None = None):
    config, example = task.config, task.example_inputs(1)
    model = task.build_model()
    fresh = jax.device_get(nn.unbox(model.init(jax.random.key(config.seed),
                                                **example)["params"]))
    params, _ = weights.init_params(fresh, source or config.init_from, task.model_config)
    self.params = params["bert"]
    self.layers = tuple(model.feature_layers)
    self.encoder = BertModel(task.model_config, add_pooling_layer=False)
    self.pad_to = max(1, int(config.data.get("pad_to_multiple_of") or 1))

    def layers(params, input_ids, token_type_ids, attention_mask):
      hidden = self.encoder.apply({"params": params}, input_ids, token_type_ids,
                                  attention_mask, output_hidden_states=True).hidden_states
      return jax.numpy.stack([hidden[i] for i in self.layers], axis=2)  # [B, W, K, H]
    self._layers = jax.jit(layers)

  def encode(self, features: dict, name: str = "") -> LayerStore:
    """The layers of every row of `features` (unpacked rows with "example_id")."""
    start = time.time()
    mask = np.asarray(features["attention_mask"])
    lengths = mask.sum(-1).astype(np.int64)
    order = np.argsort(lengths, kind="stable")  # similar lengths share a batch
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    values = None
    for begin in range(0, len(order), ENCODE_BATCH):
      rows = order[begin:begin + ENCODE_BATCH]
      longest = max(int(lengths[rows].max()), 1)
      width = min(-(-longest // self.pad_to) * self.pad_to, mask.shape[-1])
      padded = np.concatenate([rows, np.full(ENCODE_BATCH - len(rows), rows[0])])
      out = np.asarray(jax.device_get(self._layers(
          self.params, *(np.asarray(features[k])[padded, :width]
                         for k in ("input_ids", "token_type_ids", "attention_mask")))))
      if values is None:
        values = np.zeros((int(lengths.sum()),) + out.shape[2:], out.dtype)
      for i, row in enumerate(rows):
        values[starts[row]:starts[row] + lengths[row]] = out[i, :lengths[row]]
    ids = np.asarray(features["example_id"])
    slot = np.full(int(ids.max()) + 1, -1, np.int64)
    slot[ids] = np.arange(len(ids))
    print(f"Cached layers {list(self.layers)} of {len(ids)} {name} examples "
          f"({values.nbytes / 2**20:.0f} MiB) in {time.time() - start:.1f} s", flush=True)
    return LayerStore(values=values, starts=starts, lengths=lengths, slot=slot)


class CachedLayers:
  """An Input (bert_jax/core/task.py) whose batches carry their examples' cached layers:
  `inner`'s batches, less "example_id", plus "cached_layers" [B, W, K, H]."""

  def __init__(self, inner, store: LayerStore):
    self.inner, self.store = inner, store
    self.steps_per_epoch = inner.steps_per_epoch

  def _with_layers(self, batch: dict) -> dict:
    batch = dict(batch)
    ids = batch.pop("example_id")
    batch["cached_layers"] = self.store.gather(ids, batch["input_ids"].shape[-1])
    return batch

  def __iter__(self):
    return self

  def __next__(self) -> dict:
    return self._with_layers(next(self.inner))

  def epoch_batches(self, epoch: int = 0):
    return map(self._with_layers, self.inner.epoch_batches(epoch))

  def width_examples(self) -> list[dict]:
    return [self._with_layers(b) for b in self.inner.width_examples()]

  def state(self) -> dict:
    return self.inner.state()

  def restore(self, state: dict) -> None:
    self.inner.restore(state)
