"""CoNLL-2003 tagging (bert_jax/core/task.py's contract): every word's first sub-token -> a tag
of config.data.column: "ner" (9 IOB2 entity tags), "pos" (47 Penn Treebank tags) or
"chunk" (23 IOB2 chunk tags).

Reading, featurizing and the columns' official scores: conll_reader.py (COLUMNS).
"""
import os

import jax.numpy as jnp

from bert_jax.finetune import conll_reader, shards
from bert_jax.finetune.base import FinetuningTask, feature_spec
from bert_jax.core.losses import xent_sums


class ConllTask(FinetuningTask):
  """Tagging: the loss and the prediction use each word's first sub-token only."""
  name = "conll"
  reader = conll_reader
  label_keys = ("labels", "label_weights")
  sequence_outputs = ("logits",)
  packable = True  # per-token labels ride along in packed rows (finetune/example_packing.py)
  head_options = ("feature_layers", "freeze_encoder", "feature_mix", "feature_head",
                  "trainable_layers")
  example_type = conll_reader.Sentence

  def __init__(self, config, model_config):
    self.column = conll_reader.get_column(config.data.get("column", "ner"))
    self.label_names = self.column.labels
    super().__init__(config, model_config)

  def model_spec(self):
    return {"headed_model": "token_classification", "num_labels": len(self.column.labels),
            **feature_spec(self.config)}

  def example_labels(self, batch_size):  # a tag and a weight per token
    shape = (batch_size, self.config.data.max_seq_length)
    return {"labels": jnp.zeros(shape, jnp.int32), "label_weights": jnp.zeros(shape, jnp.float32)}

  def loss_sums(self, outputs, batch):
    loss, correct = xent_sums(outputs.logits, batch["labels"], batch["label_weights"])
    return {"loss": loss, "accuracy": correct}

  def denominators(self, batch):
    return {"examples": jnp.maximum(jnp.sum(batch["label_weights"]), 1.0)}

  def examples_record(self, metadata):  # the sentences; word_index is a feature
    return shards.records(metadata.sentences)

  def examples_of(self, rows, features):
    return conll_reader.TaggingMetadata(shards.from_records(self.example_type, rows),
                                        features["word_index"], self.column)

  def score(self, outputs, eval_metadata):
    scores = conll_reader.score(outputs["logits"], eval_metadata)
    per_type = scores.pop("per_type", {})
    for entity, values in per_type.items():
      scores[f"f1_{entity}"] = values["f1"] if isinstance(values, dict) else values
    return scores

  def write_predictions(self, evaluation, inputs, workdir):
    """CoNLL format: `word gold predicted` per line, a blank line between sentences."""
    outputs, eval_metadata = evaluation.outputs, inputs.eval_metadata
    ids = outputs["logits"].argmax(-1)
    tags, _ = conll_reader.word_tags(ids, eval_metadata.word_index, eval_metadata.sentences,
                                     self.column.labels)
    path = os.path.join(workdir, self.column.predictions_file)
    with open(path, "w") as f:
      for sentence, predicted in zip(eval_metadata.sentences, tags):
        for word, gold, tag in zip(sentence.words, sentence.tags, predicted):
          f.write(f"{word} {gold} {tag}\n")
        f.write("\n")
    return path
