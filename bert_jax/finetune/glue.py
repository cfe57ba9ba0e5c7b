"""GLUE (bert_jax/core/task.py's contract): [CLS] -> C logits; STS-B is regression (C = 1, MSE).

Reading, featurizing and the official metrics: glue_reader.py.
"""
import csv
import functools
import os

import jax.numpy as jnp

from bert_jax.finetune import glue_reader
from bert_jax.finetune.base import HEAD_OPTIONS, FinetuningTask, feature_spec
from bert_jax.core.losses import xent_sums
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import make_tokenizer


def prompt_spec(config, dataset: glue_reader.GlueDataset, family: str = "bert") -> dict:
  """The prompt-based classifier's spec (config.data.prompt_template / prompt_verbalizer):
  one verbalizer word per label, in the dataset's label order, each one token of the run's
  tokenizer as it reads after a space (" great"); family: the model's member, whose
  tokenizer kinds the vocabulary is read with."""
  words = [w.strip() for w in config.data.get("prompt_verbalizer", "").split(",")]
  for field, default in HEAD_OPTIONS.items():
    if config.get(field, default) != default:
      raise ValueError(f"config.{field}={config.get(field)!r}: a prompt-based classifier "
                       "reads the MLM head at the mask; it has no such option (leave it at "
                       f"{default!r} with config.data.prompt_template)")
  if dataset.is_regression:
    raise ValueError(f"config.data.prompt_template: {dataset.name} is regression; prompts "
                     "here classify (one verbalizer word per label)")
  if len(words) != dataset.num_labels or not all(words):
    raise ValueError(f"config.data.prompt_verbalizer={config.data.get('prompt_verbalizer')!r}: "
                     f"expected {dataset.num_labels} comma-separated words, one per label "
                     f"{list(dataset.labels)}")
  tokenizer = make_tokenizer(config.data, model_dir=config.init_from,
                             kinds=tokenizer_kinds(family))
  ids = tokenizer.encode_words(words)
  for word, pieces in zip(words, ids):
    if len(pieces) != 1:
      raise ValueError(f"config.data.prompt_verbalizer: {word!r} is {len(pieces)} tokens of "
                       "this tokenizer; each label word must be one")
  if len({p[0] for p in ids}) < len(ids):
    raise ValueError(f"config.data.prompt_verbalizer={config.data.prompt_verbalizer!r}: two "
                     "labels have the same token; each label needs its own word")
  return {"headed_model": "prompt_classification", "label_token_ids": [p[0] for p in ids],
          "mask_token_id": int(tokenizer.mask_id)}


class GlueTask(FinetuningTask):
  """Single sentences and pairs; STS-B is regression (MSE on the one output)."""
  name = "glue"
  reader = glue_reader
  label_keys = ("label",)
  packable = True
  head_options = tuple(HEAD_OPTIONS)
  example_type = glue_reader.GlueExample

  def __init__(self, config, model_config):
    self.dataset = glue_reader.get_dataset(config.data.dataset)
    self.select_metric = self.dataset.metrics[0]  # the dataset's first official metric
    super().__init__(config, model_config)
    self.metric_names = ("loss",) if self.dataset.is_regression else ("loss", "accuracy")
    self.label_names = self.dataset.labels

  def row_groups(self, train_metadata):  # SST-2: a sentence's phrases stay together
    return glue_reader.row_groups(train_metadata, self.dataset)

  @functools.cached_property
  def _prompt_spec(self) -> dict:  # reads the tokenizer once; model_spec is asked often
    return prompt_spec(self.config, self.dataset, self.model_config.family)

  def model_spec(self):
    if self.config.data.get("prompt_template"):
      return dict(self._prompt_spec)
    return {"headed_model": "sequence_classification", "num_labels": self.dataset.num_labels,
            **feature_spec(self.config),
            "pooling": self.config.get("classifier_pooling", "pooler")}

  def example_labels(self, batch_size):  # STS-B's scores are floats
    dtype = jnp.float32 if self.dataset.is_regression else jnp.int32
    return {"label": jnp.zeros((batch_size,), dtype)}

  def loss_sums(self, outputs, batch):
    weights = batch.get("example_mask")  # packed rows: [B, K] logits, empty slots 0
    if self.dataset.is_regression:
      error = outputs.logits[..., 0] - batch["label"].astype(jnp.float32)
      squares = jnp.square(error) if weights is None else jnp.square(error) * weights
      return {"loss": jnp.sum(squares)}
    loss, correct = xent_sums(outputs.logits, batch["label"], weights)
    return {"loss": loss, "accuracy": correct}

  def score(self, outputs, eval_metadata):
    logits = outputs["logits"]
    predictions = logits[:, 0] if self.dataset.is_regression else logits
    return glue_reader.score(predictions, eval_metadata, self.dataset)

  def write_predictions(self, evaluation, inputs, workdir):
    """GLUE submission format: a TSV of `index<TAB>prediction` (label names)."""
    logits = evaluation.outputs["logits"]
    if self.dataset.is_regression:
      values = [f"{v:.3f}" for v in logits[:, 0]]
    else:
      values = [self.dataset.labels[i] for i in logits.argmax(-1)]
    path = os.path.join(workdir, f"predictions_{self.dataset.name}.tsv")
    with open(path, "w", newline="") as f:
      writer = csv.writer(f, delimiter="\t", lineterminator="\n")
      writer.writerow(["index", "prediction"])
      writer.writerows(enumerate(values))
    return path
