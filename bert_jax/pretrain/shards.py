r"""Pretraining from pre-tokenized shards: written once with the tf.data stream, read
without TensorFlow.

Write them where TensorFlow is installed (the stream's tokenizer and example builder run
as in training, up to the rows before masking):

  python -m bert_jax.pretrain.shards --config=configs/tiny.py:runlocal=True \
      --output=runs/shards/tiny --epochs=4

writes PREFIX-train-e<epoch>-s<shard>.npz for each of the first --epochs epochs of every
data shard (each epoch its own sentence pairs and NSP / SOP labels, as the stream draws
them) and, with held-out data, PREFIX-eval.npz. Then train anywhere, TensorFlow or not:

  python -m bert_jax.train --config=configs/tiny.py:runlocal=True --workdir=runs/x \
      --config.data.shards='runs/shards/tiny-train-*.npz' \
      --config.data.eval_shards=runs/shards/tiny-eval.npz

A shard file (numpy .npz, through bert_jax/files/storage.py, so gs:// works) holds the rows of
builders.Rows: input_ids int32 [n, T], token_type_ids int8 [n, T], lengths int32 [n], one
int32 [n] array per label field ("label_<field>"), and "meta" (JSON: max_seq_length,
example_builder, vocab_size, mask_id, seed, epoch, data shard).

`ShardInput` reads every file of the pattern into one pool of rows and is the pipeline's
PretrainingInput in all the trainer and bert-jax-inspect use (next, state / restore,
steps_in_epoch, epoch_batches), yielding the same batch dict. Epoch e is a permutation of
the pool drawn with numpy Generator(seed, e); global step s takes its next batch_size rows
(process p the p-th slice of them); the remainder is dropped. Each row is masked as
masking.py's "token" selector masks it, in numpy, with the same noise (SplitMix64 keyed by
seed, epoch and the row's index in the pool): k = min(P, max(1, round(masked_lm_prob *
eligible))) of the non-special tokens, a uniform subset, of which mask_token_prob become
[MASK], random_token_prob a random ordinary token, the rest kept. So masks are dynamic
(new every epoch; with dupe_factor N, epoch e repeats epoch e mod N), and the same rows
with the same index get exactly the tf.data stream's masks (a test compares them).

Not here: the other masking selectors, packed rows, span annotations and span fields (the
tf.data stream has them); each is refused in one line.
"""
from __future__ import annotations

import io
import json

import numpy as np
from absl import app
from absl import flags

from bert_jax.startup import cli
from bert_jax.startup import config_flag
from bert_jax.files import storage
from bert_jax.models.families import tokenizer_kinds
from bert_jax.pretrain import builders
from bert_jax.pretrain import masking
from bert_jax.pretrain import pipeline
from bert_jax.text.tokenizers import make_tokenizer

_ORDER_STREAM = 5_555  # Generator stream of the epochs' row order

if __name__ == "__main__":  # flags exist only when run as a program
  _CONFIG = config_flag.define_config("config", "The config; reads config.data.")
  _OUTPUT = flags.DEFINE_string("output", None, "Prefix of the shard files to write.")
  _EPOCHS = flags.DEFINE_integer("epochs", 1, "Epochs of the stream's rows to write.")


# ------------------------------------------------------------------- masking in numpy
_GAMMA = np.uint64(masking._GOLDEN_GAMMA)


def _splitmix_mix(z: np.ndarray) -> np.ndarray:
  """masking._splitmix_mix on uint64 numpy arrays (wrapping arithmetic)."""
  for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
    z = (z ^ (z >> np.uint64(shift))) * np.uint64(multiplier)
  return z ^ (z >> np.uint64(31))


def example_noise(seed: int, epoch: int, example_index: np.ndarray, size: int) -> np.ndarray:
  """masking.example_noise in numpy: float32 [B, size], the same bits."""
  with np.errstate(over="ignore"):
    seed_key = _splitmix_mix(np.array([seed], np.uint64) * _GAMMA + np.uint64(epoch))
    keys = _splitmix_mix(seed_key + example_index.astype(np.uint64) * _GAMMA)      # [B]
    states = keys[:, None] + np.arange(1, size + 1, dtype=np.uint64)[None, :] * _GAMMA
    top_24_bits = _splitmix_mix(states) >> np.uint64(40)
  return top_24_bits.astype(np.float32) * np.float32(1.0 / (1 << 24))


def mask_rows(input_ids: np.ndarray, noise: np.ndarray,
              options: masking.MaskingOptions) -> dict[str, np.ndarray]:
  """masking.mask_batch with the "token" selector, in numpy: input_ids int32 [B, T],
  noise float32 [B, T + 2P] -> input_ids and the masked_lm_* fields."""
  predictions = options.max_predictions_per_seq
  batch, seq_length = input_ids.shape
  scores, actions, replacements = np.split(noise, [seq_length, seq_length + predictions], 1)
  eligible = ~np.isin(input_ids, np.asarray(options.special_ids, np.int32))         # [B, T]
  num_eligible = eligible.sum(1).astype(np.int32)
  budget = np.round(np.float32(options.masked_lm_prob) * num_eligible.astype(np.float32))
  budget = np.minimum(np.clip(budget.astype(np.int32), 1, predictions), num_eligible)
  k = min(predictions, seq_length)  # tf.math.top_k: descending, ties to the lower position
  top = np.argsort(-np.where(eligible, scores, np.float32(-1.0)), axis=1, kind="stable")[:, :k]
  selected = np.zeros_like(eligible)
  np.put_along_axis(selected, top, np.arange(k)[None, :] < budget[:, None], axis=1)
  is_prediction = np.arange(predictions)[None, :] < selected.sum(1)[:, None]       # [B, P]
  in_order = np.sort(np.where(selected, np.arange(seq_length)[None, :], seq_length), 1)
  in_order = np.pad(in_order[:, :predictions], [(0, 0), (0, max(0, predictions - k))])
  positions = np.where(is_prediction, in_order, 0).astype(np.int32)
  original = np.take_along_axis(input_ids, positions, axis=1)
  table = np.asarray(options.replacement_ids, np.int32)
  random_ids = table[np.minimum((replacements * np.float32(len(table))).astype(np.int32),
                                len(table) - 1)]
  to_mask = actions < options.mask_token_prob
  to_random = ~to_mask & (actions < options.mask_token_prob + options.random_token_prob)
  new_ids = np.where(to_mask, options.mask_id, np.where(to_random, random_ids, original))
  rows, slots = np.nonzero(is_prediction)
  masked = input_ids.copy()
  masked[rows, positions[rows, slots]] = new_ids[rows, slots]
  return {"input_ids": masked.astype(np.int32),
          "masked_lm_positions": positions,
          "masked_lm_ids": np.where(is_prediction, original, 0).astype(np.int32),
          "masked_lm_weights": is_prediction.astype(np.float32)}


# ------------------------------------------------------------------- the files
def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  return buffer.getvalue()


def write_rows(path: str, rows: builders.Rows, meta: dict) -> None:
  """One shard file (module docstring): the rows and their meta."""
  if rows.packing:
    raise ValueError(f"{path}: shards hold unpacked rows; set config.data.packing=False")
  arrays = {"input_ids": rows.input_ids.astype(np.int32),
            "token_type_ids": rows.token_type_ids.astype(np.int8),
            "lengths": rows.lengths.astype(np.int32),
            **{f"label_{k}": v.astype(np.int32) for k, v in rows.labels.items()},
            "meta": np.array(json.dumps(meta, sort_keys=True))}
  with storage.open_file(path, "wb") as f:
    f.write(_npz_bytes(arrays))


def read_rows(path: str) -> tuple[builders.Rows, dict]:
  """(rows, meta) of one shard file."""
  try:
    with storage.open_file(path, "rb") as f:
      arrays = np.load(io.BytesIO(f.read()))
      meta = json.loads(str(arrays["meta"]))
      labels = {k[len("label_"):]: arrays[k] for k in arrays.files if k.startswith("label_")}
      return builders.Rows(arrays["input_ids"], arrays["token_type_ids"], arrays["lengths"],
                           labels), meta
  except (OSError, ValueError, KeyError) as error:
    raise ValueError(f"{path}: not a pretraining shard file ({error})") from None


def write_shards(data_config, tokenizer, prefix: str, epochs: int) -> list[str]:
  """The tf.data stream's first `epochs` epochs of unmasked rows (and the held-out rows)
  as shard files under `prefix`; returns their paths."""
  if epochs < 1:
    raise ValueError(f"--epochs={epochs}: must be >= 1")
  check_supported(data_config, "writing shards")
  train, held_out = pipeline.make_inputs(data_config, tokenizer)
  meta = {"max_seq_length": int(data_config.max_seq_length),
          "example_builder": data_config.example_builder, "vocab_size": tokenizer.vocab_size,
          "mask_id": tokenizer.mask_id, "seed": int(data_config.seed)}
  written = []
  parts = [(f"{prefix}-train-e{epoch:03d}-s{shard:03d}.npz", rows, epoch, shard)
           for epoch in range(epochs) for shard, rows in train.unmasked_rows(epoch).items()]
  if held_out is not None:
    parts.append((f"{prefix}-eval.npz", held_out.unmasked_rows(0)[0], 0, 0))
  for path, rows, epoch, shard in parts:
    write_rows(path, rows, {**meta, "epoch": epoch, "data_shard": shard})
    written.append(path)
  return written


def check_supported(data_config, step: str) -> None:
  """One line for what shards do not carry (module docstring)."""
  refused = (("masking", data_config.masking != "token", "masks with the token selector only"),
             ("packing", bool(data_config.get("packing")), "holds unpacked rows only"),
             ("spans", bool(data_config.get("spans")), "carries no span annotations"))
  for field, bad, what in refused:
    if bad:
      raise ValueError(f"config.data.{field}={data_config[field]!r}: {step}: the shard "
                       f"input {what} (the tf.data stream, config.data.shards='', has it)")


# ------------------------------------------------------------------- the input
class ShardInput:
  """The pretraining input from shard files (module docstring): PretrainingInput's API."""

  def __init__(self, pattern: str, data_config, tokenizer, *, field: str = "shards",
               process_index: int = 0, process_count: int = 1):
    check_supported(data_config, f"config.data.{field}")
    paths = storage.glob(pattern)
    if not paths:
      raise ValueError(f"config.data.{field}={pattern!r}: no file matches")
    parts = [read_rows(path) for path in paths]
    expected = {"max_seq_length": int(data_config.max_seq_length),
                "example_builder": data_config.example_builder,
                "vocab_size": tokenizer.vocab_size, "mask_id": tokenizer.mask_id}
    for path, (_, meta) in zip(paths, parts):
      for key, value in expected.items():
        if meta.get(key) != value:
          raise ValueError(f"{path}: written with {key}={meta.get(key)!r}, this run has "
                           f"{value!r} (config.data and its tokenizer)")
    self.paths = paths
    self.rows = builders.Rows(*(np.concatenate([getattr(rows, name) for rows, _ in parts])
                                for name in ("input_ids", "token_type_ids", "lengths")),
                              {k: np.concatenate([rows.labels[k] for rows, _ in parts])
                               for k in parts[0][0].labels})
    self.options = pipeline.masking_options(data_config, tokenizer)
    self.seed = int(data_config.seed)
    self.dupe_factor = int(data_config.get("dupe_factor", 0))
    self.global_batch_size = int(data_config.batch_size)
    if self.global_batch_size % process_count:
      raise ValueError(f"batch_size {self.global_batch_size} is not divisible by "
                       f"process_count {process_count}")
    self.local_batch_size = self.global_batch_size // process_count
    self.process_index = process_index
    self.num_rows = len(self.rows.lengths)
    if self.num_rows < self.global_batch_size:
      raise ValueError(f"config.data.{field}={pattern!r}: {self.num_rows} rows do not fill "
                       f"one batch of {self.global_batch_size}")
    self.num_tokens = int(self.rows.lengths.sum())
    self.epoch, self.step = 0, 0

  # ---------------------------------------------------------------- position
  def state(self) -> dict:
    """PretrainingInput.state()'s layout, one data shard: the whole pool."""
    return {"seed": self.seed, "batch_size": self.global_batch_size, "num_shards": 1,
            "shards": {"0": {"epoch": self.epoch, "step_in_epoch": self.step,
                             "tokens": self.num_tokens}}}

  def restore(self, state: dict) -> None:
    for key, mine in (("seed", self.seed), ("batch_size", self.global_batch_size),
                      ("num_shards", 1)):
      if int(state[key]) != mine:
        raise ValueError(f"data state was saved with {key}={state[key]}, this input has {mine}")
    saved = state["shards"].get("0")
    if saved is None or int(saved["tokens"]) != self.num_tokens:
      raise ValueError(f"data state holds no position for shards of {self.num_tokens} tokens "
                       f"({', '.join(self.paths[:3])}): not the same shards")
    self.epoch, self.step = int(saved["epoch"]), int(saved["step_in_epoch"])

  def steps_in_epoch(self, epoch: int) -> int:
    return self.num_rows // self.global_batch_size

  # ---------------------------------------------------------------- iteration
  def __iter__(self) -> "ShardInput":
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    if self.step >= self.steps_in_epoch(self.epoch):
      self.epoch, self.step = self.epoch + 1, 0
    batch = self.batch(self.epoch, self.step)
    self.step += 1
    return batch

  def epoch_batches(self, epoch: int, start_step: int = 0, mask_epoch: int | None = None):
    """Epoch `epoch`'s batches from `start_step`, masked as `mask_epoch` (default: it)."""
    for step in range(start_step, self.steps_in_epoch(epoch)):
      yield self.batch(epoch, step, mask_epoch)

  def batch(self, epoch: int, step: int, mask_epoch: int | None = None) -> dict[str, np.ndarray]:
    """This process's rows of global step `step` of epoch `epoch`, masked."""
    data_epoch = self._data_epoch(epoch)
    order = np.random.default_rng([self.seed, data_epoch, _ORDER_STREAM]).permutation(
        self.num_rows)
    first = step * self.global_batch_size + self.process_index * self.local_batch_size
    index = order[first:first + self.local_batch_size]
    input_ids = self.rows.input_ids[index]
    seq_length = input_ids.shape[1]
    noise = example_noise(self.seed, self._data_epoch(epoch if mask_epoch is None
                                                      else mask_epoch),
                          index, masking.noise_size(seq_length, self.options))
    masked = mask_rows(input_ids, noise, self.options)
    attention_mask = np.arange(seq_length)[None, :] < self.rows.lengths[index][:, None]
    return {"input_ids": masked.pop("input_ids"),
            "token_type_ids": self.rows.token_type_ids[index].astype(np.int32),
            "attention_mask": attention_mask.astype(np.int32),
            **masked,
            **{k: v[index] for k, v in self.rows.labels.items()}}

  def _data_epoch(self, epoch: int) -> int:
    return epoch % self.dupe_factor if self.dupe_factor else epoch


def make_inputs(data_config, tokenizer, *, process_index: int = 0, process_count: int = 1,
                span_fields: bool = False) -> tuple[ShardInput, ShardInput | None]:
  """pipeline.make_inputs for config.data.shards (and eval_shards, when set)."""
  if span_fields:
    raise ValueError("config.data.shards: the shard input has no span fields (the span "
                     "boundary objective's); use the tf.data stream (config.data.shards='')")
  where = {"process_index": process_index, "process_count": process_count}
  train = ShardInput(data_config.shards, data_config, tokenizer, **where)
  held_out = None
  if data_config.get("eval_shards"):
    held_out = ShardInput(data_config.eval_shards, data_config, tokenizer,
                          field="eval_shards", **where)
  return train, held_out


def main(argv):
  del argv
  if _CONFIG.value is None or not _OUTPUT.value:
    raise app.UsageError("--config and --output are required")
  config = _CONFIG.value
  tokenizer = make_tokenizer(config.data, model_dir=config.get("init_from", ""),
                             kinds=tokenizer_kinds(config.get("model", {}).get("family",
                                                                               "bert")))
  folder = _OUTPUT.value.rsplit("/", 1)[0] if "/" in _OUTPUT.value else ""
  if folder:
    storage.makedirs(folder)
  paths = write_shards(config.data, tokenizer, _OUTPUT.value, _EPOCHS.value)
  rows = sum(len(read_rows(path)[0].lengths) for path in paths)
  print(f"wrote {len(paths)} shard files, {rows} rows: {paths[0]} ... {paths[-1]}")


if __name__ == "__main__":
  cli.run(main, urls=("output",))
