"""The four fine-tuning families: one model, loss and scorer each (see finetuning.py).

  glue   [CLS] -> C logits (C=1: regression, MSE)     bert_jax.data.glue
  conll  every first sub-token -> 9 IOB2 tags          bert_jax.data.conll
  squad  every token -> start/end logits               bert_jax.data.squad
  swag   4 choices -> 4 scores                         bert_jax.data.swag
"""
import csv
import json
import os

import jax.numpy as jnp
import numpy as np

from bert_jax.data import conll, glue, squad, squad_postprocess, swag
from bert_jax.models import tasks as models
from bert_jax.tasks.finetuning import FinetuningTask, xent_sums


def feature_layers(config) -> tuple[int, ...]:
  """config.feature_layers "-4,-3,-2,-1" -> (-4, -3, -2, -1); "" -> () (fine-tuning)."""
  spec = config.feature_layers
  try:
    return tuple(int(x) for x in spec.split(",")) if spec else ()
  except ValueError:
    raise ValueError(f"config.feature_layers={spec!r}: expected comma-separated layer "
                     "indices like -4,-3,-2,-1") from None


class GlueTask(FinetuningTask):
  """Single sentences and pairs; STS-B is regression (MSE on the one output)."""
  name = "glue"
  data_module = glue
  label_keys = ("label",)

  def build_model(self, model_config, config):
    self.glue_task = glue.get_task(config.data.task)
    self.metric_names = ("loss",) if self.glue_task.is_regression else ("loss", "accuracy")
    return models.BertForSequenceClassification(
        model_config, self.glue_task.num_labels, feature_layers=feature_layers(config),
        frozen_encoder=config.freeze_encoder)

  def loss_sums(self, outputs, batch):
    if self.glue_task.is_regression:
      error = outputs.logits[:, 0] - batch["label"].astype(jnp.float32)
      return {"loss": jnp.sum(jnp.square(error))}
    loss, correct = xent_sums(outputs.logits, batch["label"])
    return {"loss": loss, "accuracy": correct}

  def score(self, outputs, config):
    logits = outputs["logits"]
    predictions = logits[:, 0] if self.glue_task.is_regression else logits
    return glue.score(predictions, self.eval_metadata, self.glue_task)

  def write_predictions(self, outputs, config, workdir):
    """GLUE submission format: a TSV of `index<TAB>prediction` (label names)."""
    logits = outputs["logits"]
    if self.glue_task.is_regression:
      values = [f"{v:.3f}" for v in logits[:, 0]]
    else:
      values = [self.glue_task.labels[i] for i in logits.argmax(-1)]
    path = os.path.join(workdir, f"predictions_{self.glue_task.name}.tsv")
    with open(path, "w", newline="") as f:
      writer = csv.writer(f, delimiter="\t", lineterminator="\n")
      writer.writerow(["index", "prediction"])
      writer.writerows(enumerate(values))
    return path


class ConllTask(FinetuningTask):
  """NER: the loss and the prediction use each word's first sub-token only."""
  name = "conll"
  data_module = conll
  label_keys = ("labels", "label_weights")

  def build_model(self, model_config, config):
    return models.BertForTokenClassification(
        model_config, len(conll.LABELS), feature_layers=feature_layers(config),
        frozen_encoder=config.freeze_encoder)

  def loss_sums(self, outputs, batch):
    loss, correct = xent_sums(outputs.logits, batch["labels"], batch["label_weights"])
    return {"loss": loss, "accuracy": correct}

  def denominators(self, batch):
    return {"examples": jnp.maximum(jnp.sum(batch["label_weights"]), 1.0)}

  def score(self, outputs, config):
    scores = conll.score(outputs["logits"], self.eval_metadata)
    per_type = scores.pop("per_type", {})
    for entity, values in per_type.items():
      scores[f"f1_{entity}"] = values["f1"] if isinstance(values, dict) else values
    return scores

  def write_predictions(self, outputs, config, workdir):
    """CoNLL format: `word gold predicted` per line, a blank line between sentences."""
    ids = outputs["logits"].argmax(-1)
    tags, _ = conll.word_tags(ids, self.eval_metadata.word_index, self.eval_metadata.sentences)
    path = os.path.join(workdir, "predictions_conll.txt")
    with open(path, "w") as f:
      for sentence, predicted in zip(self.eval_metadata.sentences, tags):
        for word, gold, tag in zip(sentence.words, sentence.tags, predicted):
          f.write(f"{word} {gold} {tag}\n")
        f.write("\n")
    return path


class SquadTask(FinetuningTask):
  """Extractive QA over doc-stride windows; v2.0 adds the null-answer threshold."""
  name = "squad"
  data_module = squad
  label_keys = ("start_positions", "end_positions")
  metric_names = ("loss",)

  def build_model(self, model_config, config):
    return models.BertForQuestionAnswering(model_config)

  def loss_sums(self, outputs, batch):
    start, _ = xent_sums(outputs.start_logits, batch["start_positions"])
    end, _ = xent_sums(outputs.end_logits, batch["end_positions"])
    return {"loss": (start + end) / 2}

  def eval_outputs(self, outputs, batch):
    return {"start_logits": outputs.start_logits, "end_logits": outputs.end_logits,
            "valid": batch["valid"]}

  def _postprocess_args(self, config):
    return dict(n_best_size=config.data.n_best_size,
                max_answer_length=config.data.max_answer_length)

  def score(self, outputs, config):
    return squad_postprocess.score(outputs, self.eval_metadata,
                                   null_score_diff_threshold=config.data.null_score_threshold,
                                   **self._postprocess_args(config))

  def write_predictions(self, outputs, config, workdir):
    """SQuAD submission format: predictions.json {id: text} (+ null_odds.json for v2.0)."""
    predictions = squad_postprocess.postprocess(outputs["start_logits"], outputs["end_logits"],
                                                self.eval_metadata,
                                                **self._postprocess_args(config))
    path = os.path.join(workdir, "predictions.json")
    with open(path, "w") as f:
      json.dump(predictions.answers(config.data.null_score_threshold), f, indent=1)
    if predictions.version_2:
      with open(os.path.join(workdir, "null_odds.json"), "w") as f:
        json.dump(predictions.null_score_diff, f, indent=1)
    return path


class SwagTask(FinetuningTask):
  """Multiple choice: the four (context, ending) pairs are scored, softmax over them."""
  name = "swag"
  data_module = swag
  label_keys = ("label",)

  def build_model(self, model_config, config):
    return models.BertForMultipleChoice(model_config)

  def example_batch(self, config, batch_size):
    batch = super().example_batch(config, batch_size)
    return {k: jnp.repeat(v[:, None], swag.NUM_CHOICES, axis=1) for k, v in batch.items()}

  def loss_sums(self, outputs, batch):
    loss, correct = xent_sums(outputs.logits, batch["label"])
    return {"loss": loss, "accuracy": correct}

  def score(self, outputs, config):
    return swag.score(outputs["logits"], self.eval_metadata)

  def write_predictions(self, outputs, config, workdir):
    path = os.path.join(workdir, "predictions_swag.tsv")
    np.savetxt(path, outputs["logits"].argmax(-1), fmt="%d", header="prediction",
               comments="")
    return path
