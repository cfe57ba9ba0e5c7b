"""SWAG (bert_jax/core/task.py's contract): the four (context, ending) pairs -> 4 scores.

Reading, featurizing and accuracy: swag_reader.py.
"""
import os

import jax.numpy as jnp
import numpy as np

from bert_jax.finetune import swag_reader
from bert_jax.finetune.base import FinetuningTask
from bert_jax.core.losses import xent_sums


class SwagTask(FinetuningTask):
  """Multiple choice: the four (context, ending) pairs are scored, softmax over them."""
  name = "swag"
  reader = swag_reader
  label_keys = ("label",)
  select_metric = "accuracy"  # rows are examples: some can be held back to pick the epoch
  example_type = swag_reader.SwagExample

  def model_spec(self):
    return {"headed_model": "multiple_choice"}

  def example_inputs(self, batch_size):  # [B, C, T]: the choices of each example
    batch = super().example_inputs(batch_size)
    return {k: jnp.repeat(v[:, None], swag_reader.NUM_CHOICES, axis=1)
            for k, v in batch.items()}

  def loss_sums(self, outputs, batch):
    loss, correct = xent_sums(outputs.logits, batch["label"])
    return {"loss": loss, "accuracy": correct}

  def score(self, outputs, eval_metadata):
    return swag_reader.score(outputs["logits"], eval_metadata)

  def write_predictions(self, evaluation, inputs, workdir):
    logits = evaluation.outputs["logits"]
    path = os.path.join(workdir, "predictions_swag.tsv")
    np.savetxt(path, logits.argmax(-1), fmt="%d", header="prediction",
               comments="")
    return path
