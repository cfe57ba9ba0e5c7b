"""Fine-tuning tasks: GLUE (classification/regression), CoNLL NER, SQuAD, SWAG.

Each family is a small class over `FinetuningTask`, which owns what they share: reading
the splits through `bert_jax.data.<family>.load_split`, batching them (ArrayInput),
gathering eval outputs, scoring with the official metrics and writing predictions.
A family says which model it trains, which of its features the model reads, and its
loss as additive sums (so gradient accumulation stays exact).

config.data fields read here: task (GLUE task name), data_dir, sources ({split: source}),
train_split, eval_split, train_examples (0 = all; else a fixed random subset),
max_seq_length, pad_to_multiple_of (training batches padded only to their longest
row, rounded up to this; 0 = always max_seq_length), batch_size, eval_batch_size,
vocab_path ("" = the vocab.txt beside init_from), lower_case (used with vocab_path), seed,
plus each family's own (GLUE: heldout_fraction, heldout_seed; SQuAD: doc_stride,
max_query_length, version_2_with_negative, heldout_fraction, heldout_seed).
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bert_jax import flops
from bert_jax.data import array_input, paths
from bert_jax.data.tokenizer import WordPieceTokenizer
from bert_jax.models.config import BertConfig

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")


def make_tokenizer(config) -> WordPieceTokenizer:
  """config.data.vocab_path under the data root, else the vocab beside config.init_from."""
  if config.data.vocab_path:
    data_dir = config.data.data_dir or paths.default_data_dir()
    return WordPieceTokenizer(paths.resolve(data_dir, config.data.vocab_path),
                              lower_case=config.data.lower_case)
  if not config.init_from:
    raise ValueError("config.data.vocab_path is empty and there is no config.init_from to "
                     "take vocab.txt from")
  folder = config.init_from if os.path.isdir(config.init_from) else os.path.dirname(
      config.init_from)
  return WordPieceTokenizer.from_pretrained_dir(folder)


class FinetuningTask:
  """What every fine-tuning family shares. Subclasses set the class attributes below."""

  name = ""
  data_module = None  # bert_jax.data.<family>
  label_keys: tuple[str, ...] = ()  # batch features the loss reads besides MODEL_INPUTS
  metric_names = ("loss", "accuracy")

  # --- data ------------------------------------------------------------------------
  def load_split(self, config, split, tokenizer):
    return self.data_module.load_split(config.data, split, tokenizer,
                                       config.data.max_seq_length)

  def make_tokenizer(self, config) -> WordPieceTokenizer:
    return make_tokenizer(config)

  def make_inputs(self, config, process_index: int, process_count: int):
    tokenizer = self.tokenizer = self.make_tokenizer(config)
    train_features, _ = self.load_split(config, config.data.train_split, tokenizer)
    eval_features, self.eval_metadata = self.load_split(config, config.data.eval_split,
                                                        tokenizer)
    keep = MODEL_INPUTS + self.label_keys
    train_features = {k: train_features[k] for k in keep}
    if config.data.train_examples:  # a fixed random subset, for quick runs and curves
      rows = np.random.default_rng(config.data.seed).permutation(
          len(train_features["input_ids"]))[:config.data.train_examples]
      train_features = {k: v[np.sort(rows)] for k, v in train_features.items()}
    train = array_input.ArrayInput(train_features,
                                   config.data.batch_size, config.data.seed,
                                   process_index=process_index, process_count=process_count,
                                   pad_to_multiple_of=config.data.pad_to_multiple_of,
                                   name=f"{self.name} {config.data.train_split}")
    evaluation = array_input.ArrayInput(eval_features, config.data.eval_batch_size,
                                        shuffle=False, process_index=process_index,
                                        process_count=process_count,
                                        name=f"{self.name} {config.data.eval_split}")
    return train, evaluation

  def example_batch(self, config, batch_size: int):
    t = config.data.max_seq_length
    batch = {k: jnp.zeros((batch_size, t), jnp.int32) for k in MODEL_INPUTS}
    batch["attention_mask"] = jnp.ones((batch_size, t), jnp.int32)
    return batch

  # --- model -----------------------------------------------------------------------
  def forward(self, model, params, batch, *, deterministic: bool, rng=None):
    rngs = None if deterministic else {"dropout": rng}
    return model.apply({"params": params}, *(batch[k] for k in MODEL_INPUTS),
                       deterministic=deterministic, rngs=rngs)

  def eval_outputs(self, outputs, batch):
    """What the host collects per eval batch: the logits, and which rows are real."""
    return {"logits": outputs.logits, "valid": batch["valid"]}

  # --- loss (sums over examples, divided by the whole batch's denominators) ---------
  def denominators(self, batch):
    return {"examples": jnp.float32(batch["input_ids"].shape[0])}

  def loss(self, sums, denominators):
    return sums["loss"] / denominators["examples"]

  def metrics(self, sums, denominators):
    return {k: v / denominators["examples"] for k, v in sums.items()}

  # --- evaluation --------------------------------------------------------------------
  def collect(self, run_eval, eval_input) -> dict[str, np.ndarray]:
    """Runs every eval batch; returns the outputs of the real rows, concatenated."""
    chunks = []
    for local in eval_input.epoch_batches(0):
      out = jax.device_get(run_eval(local))
      valid = out.pop("valid").astype(bool)
      chunks.append({k: v[valid] for k, v in out.items()})
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}

  def evaluate(self, run_eval, eval_input, config) -> dict:
    outputs = self.collect(run_eval, eval_input)
    self.last_eval_outputs = outputs
    return self.score(outputs, config)

  def score(self, outputs, config) -> dict:
    raise NotImplementedError

  def write_predictions(self, outputs, config, workdir: str) -> str:
    raise NotImplementedError

  # --- bookkeeping -------------------------------------------------------------------
  def step_flops(self, model_config: BertConfig, batch) -> float:
    """Training FLOPs of the encoder on this (global) batch; heads are negligible."""
    rows, seq_len = int(np.prod(batch["input_ids"].shape[:-1])), batch["input_ids"].shape[-1]
    return 3.0 * flops.encoder_forward_flops(model_config, rows, seq_len)

  def tokens(self, batch) -> int:
    return int(batch["input_ids"].size)


def xent_sums(logits, labels, weights=None):
  """(loss sum, correct sum) of integer labels; weights [...] select what counts."""
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
  correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
  if weights is None:
    return jnp.sum(losses), jnp.sum(correct)
  return jnp.sum(losses * weights), jnp.sum(correct * weights)
