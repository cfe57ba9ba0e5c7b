"""A fine-tuning task added from outside the package: sentence classification over TSV.

config.data.sources {split: path}: one example per line, `text<TAB>label`; the classes
are the train split's labels, sorted. The model is the family's sequence classifier
(the pooler + a linear layer), trained with cross-entropy; eval scores accuracy.
Registered as `bert_jax.run.tasks.TASKS[NAME] = TsvClassificationTask`.
"""
import numpy as np

from bert_jax.finetune.base import FinetuningTask, feature_spec
from bert_jax.core.losses import xent_sums

NAME = "tsv_classification"


def read_tsv(path: str) -> tuple[list[str], list[str]]:
  """(texts, labels) of a `text<TAB>label` file; a line without a tab is a one-line error."""
  texts, labels = [], []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      text, tab, label = line.rstrip("\n").rpartition("\t")
      if not tab:
        raise ValueError(f"{path}:{number}: expected text<TAB>label, got {line[:40]!r}")
      texts.append(text)
      labels.append(label)
  return texts, labels


class TsvClassificationTask(FinetuningTask):
  """One label per text; accuracy."""
  name = NAME
  label_keys = ("label",)

  def __init__(self, config, model_config):
    super().__init__(config, model_config)
    self.label_names = tuple(sorted(set(read_tsv(config.data.sources["train"])[1])))

  def model_spec(self):
    return {"headed_model": "sequence_classification", "num_labels": len(self.label_names),
            **feature_spec(self.config), "pooling": "pooler"}

  def load_split(self, split, tokenizer):
    """(features: input_ids, token_type_ids, attention_mask int32 [N, T], label int32 [N];
    the gold labels int32 [N])."""
    texts, labels = read_tsv(self.config.data.sources[split])
    unknown = sorted(set(labels) - set(self.label_names))
    if unknown:
      raise ValueError(f"{self.config.data.sources[split]}: labels {unknown} are not in the "
                       f"train split's {list(self.label_names)}")
    features = tokenizer.encode_for_model(texts, max_length=self.config.data.max_seq_length)
    gold = np.array([self.label_names.index(label) for label in labels], np.int32)
    return {**features, "label": gold}, gold

  def loss_sums(self, outputs, batch):
    loss, correct = xent_sums(outputs.logits, batch["label"])
    return {"loss": loss, "accuracy": correct}

  def score(self, outputs, eval_metadata):
    return {"accuracy": float(np.mean(outputs["logits"].argmax(-1) == eval_metadata))}

