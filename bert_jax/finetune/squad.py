"""SQuAD v1.1 / v2.0 (bert_jax/core/task.py's contract): every token -> start and end logits.

Reading and doc-stride windows: squad_reader.py; answers and the official scores:
squad_postprocess.py.
"""
import json
import os

import jax.numpy as jnp

from bert_jax.finetune import squad_postprocess
from bert_jax.finetune import squad_reader
from bert_jax.finetune.base import PADDING_OUTPUT, FinetuningTask
from bert_jax.core.losses import xent_sums


class SquadTask(FinetuningTask):
  """Extractive QA over doc-stride windows; v2.0 adds the null-answer threshold."""
  name = "squad"
  reader = squad_reader
  label_keys = ("start_positions", "end_positions")
  metric_names = ("loss",)
  sequence_outputs = ("start_logits", "end_logits")

  def model_spec(self):
    return {"headed_model": "question_answering"}

  def loss_sums(self, outputs, batch):
    start, _ = xent_sums(outputs.start_logits, batch["start_positions"])
    end, _ = xent_sums(outputs.end_logits, batch["end_positions"])
    return {"loss": (start + end) / 2}

  def eval_outputs(self, outputs, batch):
    """Start / end logits, PADDING_OUTPUT at padding positions: no span starts or ends
    there, and a window's n-best list does not depend on how far its batch was padded."""
    real = batch["attention_mask"] > 0
    return {"start_logits": jnp.where(real, outputs.start_logits, PADDING_OUTPUT),
            "end_logits": jnp.where(real, outputs.end_logits, PADDING_OUTPUT),
            "valid": batch["valid"]}

  def _postprocess_args(self):
    return dict(n_best_size=self.config.data.n_best_size,
                max_answer_length=self.config.data.max_answer_length)

  def score(self, outputs, eval_metadata):
    return squad_postprocess.score(outputs, eval_metadata,
                                   null_score_diff_threshold=self.config.data.null_score_threshold,
                                   **self._postprocess_args())

  def write_predictions(self, evaluation, inputs, workdir):
    """SQuAD submission format: predictions.json {id: text} (+ null_odds.json for v2.0)."""
    return self.write_answers(evaluation.outputs, inputs.eval_metadata,
                              os.path.join(workdir, "predictions.json"),
                              os.path.join(workdir, "null_odds.json"))

  def write_answers(self, outputs, metadata, path: str, null_odds_path: str) -> str:
    """{question id: answer text} of start / end logits to `path` (v2.0: "" where the null
    answer wins; each question's null_score_diff to null_odds_path)."""
    predictions = squad_postprocess.postprocess(outputs["start_logits"], outputs["end_logits"],
                                                metadata, **self._postprocess_args())
    with open(path, "w") as f:
      json.dump(predictions.answers(self.config.data.null_score_threshold), f, indent=1)
    if predictions.version_2:
      with open(null_odds_path, "w") as f:
        json.dump(predictions.null_score_diff, f, indent=1)
    return path
