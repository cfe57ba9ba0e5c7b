"""Classification of the user's own labelled files (bert_jax/core/task.py's contract): one text or
a pair -> one class, several classes, or a number (configs/classify.py).

GLUE's task with its table row built from the files: the featurizer, the loss of one class
or one number, the scores (glue_reader, metrics.GLUE_METRICS) and the classifier are
GlueTask's; this module adds the multi-label loss and score. Reading the files, inferring
the labels and the problem, and writing predictions in the files' own format:
classify_reader.py.

config.data fields (besides finetune/base.py's):
  sources {train, dev, test}: the files, paths as given: relative to the current directory
    (absolute allowed), not the data root (they are the user's files); test "" = none. Or
    a named dataset, "tfds:NAME" (tfds) or "hf:NAME" (a Hugging Face dataset: a folder
    save_to_disk wrote, or a name for datasets.load_dataset), whose split
    dataset_splits[split] is read (its features the columns, a ClassLabel's class names the
    labels; predictions: predictions_<split>.jsonl).
  format: "" (each file's by its extension: classify_reader.EXTENSIONS) or one of
    classify_reader.FORMATS for all of them.
  text, text_pair ("" = one text), label: column names; id: the column kept in the
    predictions ("" = `id` where a file has it, else the row's line number).
  problem_type: "" (inferred: classify_reader.infer_problem) or one of
    classify_reader.PROBLEMS.
  label_sep: a CSV/TSV label field holds several labels split on this ("|"): multi-label.
  skip_bad_rows: False: a bad row is the error "<file>:<line>: <what is wrong>"; True: it is
    skipped, and the file's count (with the first) is printed once.

The formats and bad rows: classify_reader.py. The labels (classes) are the training file's,
sorted: as numbers when every one is a number, else as strings. The trainer records them in
the workdir (model_config.json "labels"), so evaluation, predictions and the HF export
(config.json id2label/label2id) read the same mapping.
"""
import functools
import os

import jax.numpy as jnp

from bert_jax.finetune import base, classify_reader, glue_reader, metrics, shards
from bert_jax.finetune.glue import GlueTask
from bert_jax.finetune import sources
from bert_jax.core.losses import sigmoid_xent_sums


class ClassifyTask(GlueTask):
  """GLUE's classifier on the files of config.data.sources (the module docstring)."""
  name = "classify"
  reader = None  # load_split reads the files
  example_type = classify_reader.ClassifyExample

  def __init__(self, config, model_config):  # pylint: disable=super-init-not-called
    self.config = config
    self.columns = classify_reader.Columns.of(config.data)
    self.problem, self.label_names, _ = self._train
    packed = [f for f in ("packing", "pack_each_batch") if config.data.get(f)]
    if self.problem == "multi_label" and packed:
      raise ValueError(f"config.data.{packed[0]}: a multi-label example's labels ([C] per "
                       "example) have no packed form; set it to 0/false")
    self.packable = self.problem != "multi_label"
    data = config.data
    self.dataset = glue_reader.GlueDataset(
        self.name, dict(data.sources),
        glue_reader.TsvColumns(True, data.text, data.text_pair or None, data.label),
        glue_reader.TsvColumns(True, data.text, data.text_pair or None, None),
        None if self.problem == "regression" else self.label_names,
        classify_reader.PROBLEMS[self.problem].metrics, "",
        (data.text, data.text_pair or None), None)
    self.select_metric = self.dataset.metrics[0]
    base.FinetuningTask.__init__(self, config, model_config)
    self.metric_names = classify_reader.PROBLEMS[self.problem].metric_names

  @functools.cached_property
  def _train(self):
    """(problem, labels, examples) of the training file, read once (with config.data.shards:
    the training split's file, and the problem and labels its writer inferred)."""
    data = self.config.data
    if data.get("shards"):
      _, rows, meta = shards.read_split(self.config, data.train_split)
      labels = meta["task_state"]["labels"]
      return (meta["task_state"]["problem"], None if labels is None else tuple(labels),
              shards.from_records(classify_reader.ClassifyExample, rows))
    path = data.sources[data.train_split]
    return classify_reader.read_labelled(path, self.columns, data.get("problem_type") or "",
                                         None, self.skips(self.where(data.train_split)),
                                         self.dataset_split(data.train_split))

  def read_split(self, split: str) -> list[classify_reader.ClassifyExample]:
    data = self.config.data
    path = (data.get("sources") or {}).get(split)
    if not path:
      raise ValueError(f"config.data.sources.{split} is empty: name its file")
    if split == data.train_split:
      return self._train[2]
    skips, dataset_split = self.skips(self.where(split)), self.dataset_split(split)
    if split == data.get("predict_split"):
      return classify_reader.read_unlabelled(path, self.columns, skips, dataset_split)
    return classify_reader.read_labelled(path, self.columns, self.problem, self.label_names,
                                         skips, dataset_split)[2]

  def dataset_split(self, split: str) -> str:
    """The split a named dataset's source of `split` reads (config.data.dataset_splits)."""
    return (self.config.data.get("dataset_splits") or {}).get(split) or ""

  def where(self, split: str) -> str:
    """The split's file, or named dataset and its split, as messages name it."""
    source = self.config.data.sources[split]
    named = sources.dataset_prefix(source)
    return f"{source}:{self.dataset_split(split)}" if named else source

  def load_split(self, split, tokenizer):
    examples = self.read_split(split)
    labels = (classify_reader.multi_hot(examples, self.label_names)
              if self.problem == "multi_label"
              and split != self.config.data.get("predict_split") else None)
    return glue_reader.featurize(examples, self.dataset, tokenizer,
                                 self.config.data.max_seq_length, labels=labels), examples

  def shard_state(self):
    return {"problem": self.problem, "labels": self.label_names}

  def model_spec(self):
    return {**super().model_spec(),
            "problem_type": classify_reader.PROBLEMS[self.problem].hf_problem_type}

  def example_labels(self, batch_size):
    if self.problem != "multi_label":
      return super().example_labels(batch_size)
    return {"label": jnp.zeros((batch_size, len(self.label_names)), jnp.float32)}

  def loss_sums(self, outputs, batch):
    if self.problem != "multi_label":
      return super().loss_sums(outputs, batch)
    loss, exact = sigmoid_xent_sums(outputs.logits, batch["label"])
    return {"loss": loss, "exact_match": exact}

  def score(self, outputs, eval_metadata):
    if self.problem != "multi_label":
      return super().score(outputs, eval_metadata)
    truth = classify_reader.multi_hot(eval_metadata, self.label_names)
    return {"micro_f1": metrics.micro_f1(outputs["logits"] > 0, truth)}

  def write_predictions(self, evaluation, inputs, workdir):
    """The test file's predictions (the dev file's without one), in its format:
    WORKDIR/predictions_<its name>.<csv|tsv|jsonl> (classify_reader.write_predictions)."""
    data = self.config.data
    if inputs.predict is not None:
      split, examples = self.predict_split(), inputs.predict_metadata
      logits = evaluation.outputs["predict_logits"]
    else:
      split, examples, logits = data.eval_split, inputs.eval_metadata, evaluation.outputs["logits"]
    source = data.sources[split]
    named = sources.dataset_prefix(source)
    fmt = "jsonl" if named else classify_reader.file_format(source, self.columns.format)
    stem = self.dataset_split(split) if named else os.path.splitext(os.path.basename(source))[0]
    path = os.path.join(workdir, f"predictions_{stem}{classify_reader.SUFFIXES[fmt]}")
    values = classify_reader.predicted_values(logits, self.problem, self.label_names)
    classify_reader.write_predictions(path, fmt, examples, values, self.columns.label_sep)
    return path
