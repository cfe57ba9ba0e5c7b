"""GLUE (bert_jax/task.py's contract): [CLS] -> C logits; STS-B is regression (C = 1, MSE).

Reading, featurizing and the official metrics: glue_reader.py.
"""
import csv
import os

import jax.numpy as jnp

from bert_jax.finetune import glue_reader
from bert_jax.finetune.base import FinetuningTask, feature_layers
from bert_jax.losses import xent_sums


class GlueTask(FinetuningTask):
  """Single sentences and pairs; STS-B is regression (MSE on the one output)."""
  name = "glue"
  reader = glue_reader
  label_keys = ("label",)
  packable = True

  def __init__(self, config, model_config):
    self.dataset = glue_reader.get_dataset(config.data.dataset)
    self.select_metric = self.dataset.metrics[0]  # the dataset's first official metric
    super().__init__(config, model_config)
    self.metric_names = ("loss",) if self.dataset.is_regression else ("loss", "accuracy")
    self.label_names = self.dataset.labels

  def row_groups(self, train_metadata):  # SST-2: a sentence's phrases stay together
    return glue_reader.row_groups(train_metadata, self.dataset)

  def model_spec(self):
    return {"task_model": "sequence_classification", "num_labels": self.dataset.num_labels,
            "feature_layers": list(feature_layers(self.config)),
            "frozen_encoder": bool(self.config.freeze_encoder),
            "pooling": self.config.get("classifier_pooling", "pooler")}

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
