"""The nine GLUE datasets: a table of their file layouts, a reader, a featuriser, scores.

API (the same shape as conll.py, squad.py and swag.py):
  DATASETS: dict[str, GlueDataset]        cola sst2 mrpc stsb qqp mnli qnli rte wnli
  read_examples(dataset, split, source=None, *, data_dir=None) -> list[GlueExample]
      source: None (the table's file for `split` under the data root), any file path
      (e.g. "glue/MNLI/k-shot/16-13/train.tsv"; `split` picks the layout: test*
      files have no label column), or "tfds:glue/<name>" (split dev -> validation).
  featurize(examples, dataset, tokenizer, max_seq_length, prompt_template="") -> dict of
      numpy arrays (with a prompt template, the second segment is the template: prompt_texts):
      input_ids, token_type_ids, attention_mask  int32 [N, T]
      label          int32 [N] (label index, -1 when unlabeled), float32 for STS-B
                     (NaN when unlabeled)
      example_index  int32 [N]
  load_split(config_like, split, tokenizer, max_seq_length) -> (features, examples)
      config_like: dict/ConfigDict with `dataset`, optional `data_dir` and `sources`
      ({split: source}, defaulting to the table), and `heldout_fraction` /
      `heldout_seed`: when > 0, split "train" drops and split "heldout" keeps a seeded
      random fraction of the train rows (`split_heldout`), for datasets without a dev file;
      `prompt_template`, featurize's.
  score(predictions, examples, dataset) -> {metric: value}
      predictions: logits [N, num_labels] (argmax taken), or scores [N] for STS-B.

Text columns are given by header name, or by index for headerless files (CoLA's train
and dev). Lines are split on tabs only: no CSV quoting, as in BERT's run_classifier.
Blank lines are skipped. A missing column, a label outside the dataset's label set (an
STS-B score that is not a number in [0, 5]) or an empty file raises DataFormatError
"<path>:<line>: ...".
"""
import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from bert_jax.finetune import metrics
from bert_jax.finetune import sources as task_sources
from bert_jax.finetune.sources import DataFormatError

Column = str | int  # A header name, or an index for files without a header.


@dataclasses.dataclass(frozen=True)
class TsvColumns:
  """Where the fields of one kind of TSV file are."""
  has_header: bool
  text_a: Column
  text_b: Column | None
  label: Column | None  # None: the file has no labels (test sets).


@dataclasses.dataclass(frozen=True)
class GlueDataset:
  """One GLUE dataset: files, columns, labels and metrics."""
  name: str
  files: Mapping[str, str]       # split -> path relative to the data root.
  layout: TsvColumns             # train and dev files.
  test_layout: TsvColumns        # test files (no label column).
  labels: tuple[str, ...] | None  # Label strings as in the files; None = regression.
  metrics: tuple[str, ...]       # Names in metrics.GLUE_METRICS.
  tfds_name: str                 # "glue/<tfds_name>".
  tfds_text: tuple[str, str | None]  # tfds feature names of text_a and text_b.
  tfds_labels: tuple[str, ...] | None  # Our label string for each tfds class index.
  # Training rows are phrases of longer training rows (SST's parse-tree nodes): a held-back
  # split keeps each phrase on its sentence's side (phrase_groups).
  phrase_rows: bool = False
  dev_split: str = "dev"  # the split a run evaluates on by default (MNLI: dev_matched)

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  @property
  def num_labels(self) -> int:
    """Width of the classifier output: the label count, or 1 for regression."""
    return 1 if self.labels is None else len(self.labels)


def _files(folder: str, *splits: str) -> dict[str, str]:
  return {split: f"glue/{folder}/{split}.tsv" for split in splits}


_STANDARD_SPLITS = ("train", "dev", "test")
_MNLI_SPLITS = ("train", "dev_matched", "dev_mismatched", "test_matched",
                "test_mismatched")
_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
_MNLI_LABELS = ("contradiction", "entailment", "neutral")  # run_classifier's order.


def _pair(a: str, b: str, label: str) -> tuple[TsvColumns, TsvColumns]:
  """Header-named layouts of a sentence-pair dataset: (train/dev, test)."""
  return TsvColumns(True, a, b, label), TsvColumns(True, a, b, None)


_COLA = (TsvColumns(False, 3, None, 1), TsvColumns(True, "sentence", None, None))
_SST2 = (TsvColumns(True, "sentence", None, "label"), TsvColumns(True, "sentence", None, None))

DATASETS: dict[str, GlueDataset] = {dataset.name: dataset for dataset in (
    GlueDataset("cola", _files("CoLA", *_STANDARD_SPLITS), *_COLA, _BINARY,
             ("matthews_corrcoef",), "cola", ("sentence", None), _BINARY),
    GlueDataset("sst2", _files("SST-2", *_STANDARD_SPLITS), *_SST2, _BINARY,
             ("accuracy",), "sst2", ("sentence", None), _BINARY, phrase_rows=True),
    GlueDataset("mrpc", _files("MRPC", *_STANDARD_SPLITS),
             *_pair("#1 String", "#2 String", "Quality"), _BINARY,
             ("f1", "accuracy"), "mrpc", ("sentence1", "sentence2"), _BINARY),
    GlueDataset("stsb", _files("STS-B", *_STANDARD_SPLITS),
             *_pair("sentence1", "sentence2", "score"), None,
             ("pearson", "spearman"), "stsb", ("sentence1", "sentence2"), None),
    GlueDataset("qqp", _files("QQP", *_STANDARD_SPLITS),
             *_pair("question1", "question2", "is_duplicate"), _BINARY,
             ("f1", "accuracy"), "qqp", ("question1", "question2"), _BINARY),
    GlueDataset("mnli", _files("MNLI", *_MNLI_SPLITS),
             *_pair("sentence1", "sentence2", "gold_label"), _MNLI_LABELS,
             ("accuracy",), "mnli", ("premise", "hypothesis"),
             ("entailment", "neutral", "contradiction"), dev_split="dev_matched"),
    GlueDataset("qnli", _files("QNLI", *_STANDARD_SPLITS),
             *_pair("question", "sentence", "label"), _ENTAILMENT,
             ("accuracy",), "qnli", ("question", "sentence"), _ENTAILMENT),
    GlueDataset("rte", _files("RTE", *_STANDARD_SPLITS),
             *_pair("sentence1", "sentence2", "label"), _ENTAILMENT,
             ("accuracy",), "rte", ("sentence1", "sentence2"), _ENTAILMENT),
    # tfds orders WNLI's classes (not_entailment, entailment) = the files' 0 and 1.
    GlueDataset("wnli", _files("WNLI", *_STANDARD_SPLITS),
             *_pair("sentence1", "sentence2", "label"), _BINARY,
             ("accuracy",), "wnli", ("sentence1", "sentence2"), _BINARY),
)}

STSB_RANGE = (0.0, 5.0)


@dataclasses.dataclass(frozen=True)
class GlueExample:
  guid: str                        # "<split>-<row>", row counted from 0.
  text_a: str
  text_b: str | None
  label: str | float | None        # A label string, an STS-B score, or None (test).
  provenance: str                  # "<path>:<line>" or "tfds:<name>:<split>[<i>]".


def get_dataset(dataset: str | GlueDataset) -> GlueDataset:
  if isinstance(dataset, GlueDataset):
    return dataset
  if dataset not in DATASETS:
    raise ValueError(f"Unknown GLUE dataset {dataset!r}; known: {sorted(DATASETS)}.")
  return DATASETS[dataset]


def _is_test(split: str) -> bool:
  return split.startswith("test")


# ------------------------------------------------------------------------------------
# Reading.
# ------------------------------------------------------------------------------------
def _check_label(dataset: GlueDataset, label: str, where: str) -> str | float:
  """The validated label: a string of dataset.labels, or an STS-B score in [0, 5]."""
  if not dataset.is_regression:
    if label not in dataset.labels:
      raise DataFormatError(f"{where}: label {label!r} is not one of "
                            f"{list(dataset.labels)} (dataset {dataset.name}).")
    return label
  try:
    score = float(label)
  except ValueError:
    score = math.nan
  low, high = STSB_RANGE
  if not low <= score <= high:  # Also rejects NaN.
    raise DataFormatError(f"{where}: score {label!r} is not a number in "
                          f"[{low:g}, {high:g}] (dataset {dataset.name}).")
  return score


def _column_indices(layout: TsvColumns, header: list[str] | None,
                    where: str) -> list[int | None]:
  """Indices of (text_a, text_b, label), looked up in the header when named."""
  indices = []
  for column in (layout.text_a, layout.text_b, layout.label):
    if column is None or isinstance(column, int):
      indices.append(column)
    elif column in header:
      indices.append(header.index(column))
    else:
      raise DataFormatError(f"{where}: the header has no column {column!r} "
                            f"(columns: {header}).")
  return indices


def read_tsv(path: str, dataset: str | GlueDataset, split: str) -> list[GlueExample]:
  """Examples of a GLUE TSV in the layout of `split` (test* splits: unlabeled)."""
  dataset = get_dataset(dataset)
  layout = dataset.test_layout if _is_test(split) else dataset.layout
  lines = task_sources.read_lines(path)
  indices = header = None
  if layout.has_header:
    line_number, text = next(lines)
    header = text.split("\t")
    indices = _column_indices(layout, header, f"{path}:{line_number}")
  else:
    indices = _column_indices(layout, None, path)
  needed = max(i for i in indices if i is not None) + 1
  examples = []
  for line_number, text in lines:
    if not text.strip():
      continue
    where = f"{path}:{line_number}"
    fields = text.split("\t")
    if len(fields) < needed:
      raise DataFormatError(f"{where}: expected at least {needed} tab-separated "
                            f"columns, found {len(fields)}.")
    a, b, label = (None if i is None else fields[i] for i in indices)
    if label is not None:
      label = _check_label(dataset, label, where)
    examples.append(GlueExample(f"{split}-{len(examples)}", a, b, label, where))
  if not examples:
    raise DataFormatError(f"{path}:1: no examples (only a header or blank lines).")
  return examples


def tfds_split(split: str) -> str:
  """Our split name -> the tfds GLUE split name (dev* -> validation*)."""
  return "validation" + split[3:] if split.startswith("dev") else split


def read_tfds(dataset: str | GlueDataset, split: str,
              tfds_data_dir: str | None = None) -> list[GlueExample]:
  """Examples of `tfds.load("glue/<dataset>", split)`, with the files' label strings."""
  dataset = get_dataset(dataset)
  name, tf_split = f"glue/{dataset.tfds_name}", tfds_split(split)
  records, _ = task_sources.load_tfds(name, tf_split, tfds_data_dir)
  key_a, key_b = dataset.tfds_text
  examples = []
  for index, record in enumerate(records):
    where = f"tfds:{name}:{tf_split}[{index}]"
    raw_label = record["label"]
    if dataset.is_regression:
      label = None if _is_test(split) else _check_label(dataset, str(raw_label), where)
    elif int(raw_label) < 0:
      label = None
    elif int(raw_label) >= len(dataset.tfds_labels):
      raise DataFormatError(f"{where}: label index {int(raw_label)} is out of range.")
    else:
      label = dataset.tfds_labels[int(raw_label)]
    examples.append(GlueExample(
        f"{split}-{index}", task_sources.as_text(record[key_a]),
        None if key_b is None else task_sources.as_text(record[key_b]), label, where))
  return examples


def read_examples(dataset: str | GlueDataset, split: str, source: str | None = None, *,
                  data_dir: str | None = None) -> list[GlueExample]:
  """Examples of one split from the table's file, another file, or tfds."""
  dataset = get_dataset(dataset)
  if source is None:
    if split not in dataset.files:
      raise ValueError(f"GLUE {dataset.name} has no split {split!r}; splits: "
                       f"{sorted(dataset.files)}.")
    source = dataset.files[split]
  if task_sources.is_tfds(source):
    expected = f"glue/{dataset.tfds_name}"
    if task_sources.tfds_name(source) != expected:
      raise ValueError(f"Task {dataset.name} reads tfds:{expected}, not {source!r}.")
    return read_tfds(dataset, split)
  return read_tsv(task_sources.resolve_file(source, data_dir), dataset, split)


# ------------------------------------------------------------------------------------
# Features and scores.
# ------------------------------------------------------------------------------------
def label_array(examples: Sequence[GlueExample], dataset: str | GlueDataset) -> np.ndarray:
  """int32 label indices (-1 unlabeled), or float32 STS-B scores (NaN unlabeled)."""
  dataset = get_dataset(dataset)
  if dataset.is_regression:
    return np.array([math.nan if e.label is None else e.label for e in examples],
                    np.float32)
  index = {label: i for i, label in enumerate(dataset.labels)}
  return np.array([-1 if e.label is None else index[e.label] for e in examples],
                  np.int32)


def prompt_texts(examples: Sequence[GlueExample], template: str, mask_token: str) -> list[str]:
  """Each example's second segment under a prompt template (prompt-based fine-tuning):
  `{mask}` becomes the tokenizer's mask token and `{b}` the example's second text, which a
  pair task's template must hold and a single-sentence task's must not ("it was {mask} ."
  for SST-2: `[CLS] sentence [SEP] it was [MASK] . [SEP]`; "{mask} , {b}" for a pair)."""
  has_b = examples[0].text_b is not None
  if template.count("{mask}") != 1:
    raise ValueError(f"config.data.prompt_template={template!r}: expected exactly one "
                     "{mask}")
  if has_b != ("{b}" in template):
    raise ValueError(f"config.data.prompt_template={template!r}: " + (
        "a pair task's template must hold {b}, the second text" if has_b else
        "a single-sentence task has no {b}"))
  return [template.replace("{mask}", mask_token).replace("{b}", e.text_b or "")
          for e in examples]


def check_one_mask(input_ids: np.ndarray, mask_id: int, examples: Sequence[GlueExample]):
  """Every prompted row must keep exactly one mask token (its class is read there)."""
  counts = np.sum(input_ids == mask_id, axis=-1)
  bad = np.flatnonzero(counts != 1)
  if len(bad):
    i = int(bad[0])
    raise ValueError(f"{examples[i].provenance}: the prompted example holds {counts[i]} mask "
                     f"tokens instead of one ({len(bad)} such examples; a text with the mask "
                     "token in it, or a template cut off by max_seq_length)")


def featurize(examples: Sequence[GlueExample], dataset: str | GlueDataset, tokenizer,
              max_seq_length: int, prompt_template: str = "",
              labels: np.ndarray | None = None) -> dict[str, np.ndarray]:
  """[CLS] a [SEP] (b [SEP]) model inputs (tokenizer.encode_for_model) plus labels; with a
  prompt template, b is the template (prompt_texts). labels: the label feature, when not
  `label_array`'s (a multi-label file's [N, C] rows: finetune/classify_reader.py)."""
  dataset = get_dataset(dataset)
  if not examples:
    raise ValueError("No examples to featurize.")
  has_b = examples[0].text_b is not None
  texts_b = [e.text_b for e in examples] if has_b else None
  if prompt_template:
    texts_b = prompt_texts(examples, prompt_template, tokenizer.vocab[tokenizer.mask_id])
  features = tokenizer.encode_for_model([e.text_a for e in examples], texts_b,
                                        max_length=max_seq_length)
  if prompt_template:
    check_one_mask(features["input_ids"], tokenizer.mask_id, examples)
  features["label"] = label_array(examples, dataset) if labels is None else labels
  features["example_index"] = np.arange(len(examples), dtype=np.int32)
  return features


def load_split(config_like, split: str, tokenizer, max_seq_length: int):
  """(features, examples) of `split` for config_like.dataset; see the module docstring."""
  get = lambda key, default=None: task_sources.config_get(config_like, key, default)
  dataset = get_dataset(get("dataset"))
  sources = get("sources", None) or {}
  fraction = get("heldout_fraction", 0.0) or 0.0
  if split == "heldout" and not fraction:
    raise ValueError("split 'heldout' needs config.data.heldout_fraction > 0")
  read_split = "train" if fraction and split == "heldout" else split
  examples = read_examples(dataset, read_split, sources.get(read_split),
                           data_dir=get("data_dir"))
  if fraction and split in ("train", "heldout"):
    kept, heldout = split_heldout(examples, fraction, get("heldout_seed", 0), dataset)
    examples = kept if split == "train" else heldout
  return featurize(examples, dataset, tokenizer, max_seq_length,
                   get("prompt_template", "") or ""), examples


def split_heldout(examples: Sequence[GlueExample], fraction: float,
                  seed: int = 0, dataset: str | GlueDataset | None = None,
                  ) -> tuple[list[GlueExample], list[GlueExample]]:
  """(kept, heldout): a seeded random `fraction` of the rows held back for evaluation.

  For datasets whose dev set is not at hand (MRPC, RTE here): the same rows are held back
  for a given seed, so the train split never sees them. A `dataset` with phrase_rows
  (SST-2) holds back whole sentences with their phrases (row_groups) and, as its dev set
  holds whole sentences, scores the sentences only: their phrases are in neither list.
  """
  if not 0.0 < fraction < 1.0:
    raise ValueError(f"heldout_fraction must be in (0, 1), got {fraction}.")
  count = min(len(examples) - 1, max(1, round(fraction * len(examples))))
  groups = row_groups(examples, dataset) if dataset is not None else None
  held = task_sources.heldout_mask(len(examples), count, seed, groups)
  if held.all():
    raise ValueError(f"heldout_fraction={fraction} holds back every one of the "
                     f"{len(examples)} rows (whole sentences with their phrases)")
  scored = held if groups is None else held & (groups == np.arange(len(examples)))
  if groups is not None:
    print(f"{get_dataset(dataset).name} held out: {scored.sum()} whole sentences scored; "
          f"their other {held.sum() - scored.sum()} phrases neither trained on nor scored")
  return ([e for e, h in zip(examples, held) if not h],
          [e for e, h in zip(examples, scored) if h])


def row_groups(examples: Sequence[GlueExample],
               dataset: str | GlueDataset) -> np.ndarray | None:
  """[len(examples)] group ids a held-back split must not cut (None: every row apart)."""
  return phrase_groups(examples) if get_dataset(dataset).phrase_rows else None


def phrase_groups(examples: Sequence[GlueExample]) -> np.ndarray:
  """[len(examples)] ints: each row's sentence, the row index of its root.

  A root is a row whose words are no contiguous part of a longer row's (SST-2: a full
  sentence); every other row belongs to the first root, longest first, that holds it as a
  word span. Rows with equal text share a group. A phrase found in several sentences
  (e.g. "the film") goes with one of them.
  """
  words = [tuple(e.text_a.split()) for e in examples]
  root_of: dict[tuple[str, ...], int] = {}
  groups = np.empty(len(examples), np.int64)
  for i in sorted(range(len(words)), key=lambda i: (-len(words[i]), i)):
    if words[i] not in root_of:  # held by no longer row: a root, claiming its spans
      w = words[i]
      for start in range(len(w)):
        for end in range(start + 1, len(w) + 1):
          root_of.setdefault(w[start:end], i)
    groups[i] = root_of[words[i]]
  return groups


def score(predictions, examples: Sequence[GlueExample],
          dataset: str | GlueDataset) -> dict[str, float]:
  """The dataset's metrics (e.g. mrpc: f1 and accuracy) of logits/scores vs labels; none
  ({}) for an unlabeled split (a test file: its predictions are what it is for)."""
  dataset = get_dataset(dataset)
  if task_sources.unlabeled(examples, lambda e: e.label is None):
    return {}
  predictions = np.asarray(predictions)
  if dataset.is_regression:
    predictions = predictions.reshape(len(examples)).astype(np.float64)
  else:
    if predictions.shape != (len(examples), len(dataset.labels)):
      raise ValueError(f"Expected logits [{len(examples)}, {len(dataset.labels)}], got "
                       f"{predictions.shape}.")
    predictions = predictions.argmax(-1)
  return metrics.glue_metrics(dataset.metrics, predictions, label_array(examples, dataset))
