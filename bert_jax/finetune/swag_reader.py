"""SWAG multiple choice: reader of the official swagaf CSV, featuriser, accuracy.

API (the same shape as glue.py, conll.py and squad.py):
  NUM_CHOICES = 4
  read_examples(source, split="train", *, data_dir=None) -> list[SwagExample]
      source: a CSV in the swagaf "regular" format (header
      ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..3,label";
      test files have no label column), e.g. "swag/swag.csv".
  featurize(examples, tokenizer, max_seq_length) -> dict of numpy arrays:
      input_ids, token_type_ids, attention_mask  int32 [N, 4, T]
      label          int32 [N] (index of the gold ending, -1 when unlabeled)
      example_index  int32 [N]
  load_split(config_like, split, tokenizer, max_seq_length) -> (features, examples)
      config_like: dict/ConfigDict with `sources` ({split: source}), optional `data_dir`.
  score(logits, examples) -> {"accuracy"}; logits [N, 4].

Choice i is the pair (sent1, sent2 + " " + ending_i), as in BERT's SWAG fine-tuning:
[CLS] context [SEP] start of the next sentence + ending [SEP], truncated longest first.
Columns are found by header name. A missing column, a label outside 0-3 or an empty
file raises DataFormatError "<path>:<line>: ...". There is no tfds SWAG dataset.
"""
import csv
import dataclasses
import io
from collections.abc import Sequence

import numpy as np

from bert_jax.finetune import metrics
from bert_jax.finetune import sources as task_sources
from bert_jax.finetune.sources import DataFormatError

NUM_CHOICES = 4
TEXT_COLUMNS = ("sent1", "sent2", *(f"ending{i}" for i in range(NUM_CHOICES)))
LABEL_COLUMN = "label"


@dataclasses.dataclass(frozen=True)
class SwagExample:
  guid: str                 # "<split>-<row>", row counted from 0.
  context: str              # sent1
  start_of_ending: str      # sent2: the first words of the next sentence.
  endings: tuple[str, ...]  # NUM_CHOICES candidate continuations of sent2.
  label: int | None         # Index of the gold ending; None when unlabeled.
  provenance: str           # "<path>:<line>"


def read_csv(path: str, split: str = "train") -> list[SwagExample]:
  """Examples of a swagaf-format CSV; the label column is optional (test files)."""
  with open(path, encoding="utf-8-sig", newline="") as f:
    text = f.read()
  if not text.strip():
    raise DataFormatError(f"{path}:1: the file is empty.")
  reader = csv.reader(io.StringIO(text, newline=""))
  header = next(reader)
  missing = [c for c in TEXT_COLUMNS if c not in header]
  if missing:
    raise DataFormatError(f"{path}:1: the header has no column(s) {missing} "
                          f"(columns: {header}).")
  indices = [header.index(c) for c in TEXT_COLUMNS]
  label_index = header.index(LABEL_COLUMN) if LABEL_COLUMN in header else None
  needed = max(indices + [label_index or 0]) + 1
  examples = []
  line_number = reader.line_num
  for fields in reader:
    first_line, line_number = line_number + 1, reader.line_num
    if not any(field.strip() for field in fields):
      continue
    where = f"{path}:{first_line}"
    if len(fields) < needed:
      raise DataFormatError(f"{where}: expected {needed} comma-separated columns, "
                            f"found {len(fields)}.")
    sent1, sent2, *endings = (fields[i] for i in indices)
    label = None
    if label_index is not None:
      raw = fields[label_index].strip()
      if raw not in {str(i) for i in range(NUM_CHOICES)}:
        raise DataFormatError(
            f"{where}: label {raw!r} is not one of 0..{NUM_CHOICES - 1}.")
      label = int(raw)
    examples.append(SwagExample(f"{split}-{len(examples)}", sent1, sent2,
                                tuple(endings), label, where))
  if not examples:
    raise DataFormatError(f"{path}:1: no examples (only a header or blank lines).")
  return examples


def read_examples(source: str, split: str = "train", *,
                  data_dir: str | None = None) -> list[SwagExample]:
  """Examples of a SWAG CSV file under the data root (or an absolute path)."""
  if task_sources.is_tfds(source):
    raise ValueError(f"tfds has no SWAG dataset ({source!r}); give the CSV file.")
  return read_csv(task_sources.resolve_file(source, data_dir), split)


def featurize(examples: Sequence[SwagExample], tokenizer,
              max_seq_length: int) -> dict[str, np.ndarray]:
  """[N, 4, T] model inputs, one [CLS] context [SEP] sent2 ending [SEP] per choice."""
  if not examples:
    raise ValueError("No examples to featurize.")
  contexts = [e.context for e in examples for _ in range(NUM_CHOICES)]
  choices = [f"{e.start_of_ending} {ending}" for e in examples for ending in e.endings]
  flat = tokenizer.encode_for_model(contexts, choices, max_length=max_seq_length)
  features = {key: value.reshape(len(examples), NUM_CHOICES, max_seq_length)
              for key, value in flat.items()}
  features["label"] = np.array([-1 if e.label is None else e.label for e in examples],
                               np.int32)
  features["example_index"] = np.arange(len(examples), dtype=np.int32)
  return features


def load_split(config_like, split: str, tokenizer, max_seq_length: int):
  """(features, examples) of `split`; see the module docstring."""
  source = task_sources.split_source(config_like, split)
  examples = read_examples(source, split,
                           data_dir=task_sources.config_get(config_like, "data_dir"))
  return featurize(examples, tokenizer, max_seq_length), examples


def score(logits, examples: Sequence[SwagExample]) -> dict[str, float]:
  """Accuracy of the argmax ending."""
  logits = np.asarray(logits)
  if logits.shape != (len(examples), NUM_CHOICES):
    raise ValueError(f"Expected logits [{len(examples)}, {NUM_CHOICES}], got "
                     f"{logits.shape}.")
  if task_sources.unlabeled(examples, lambda e: e.label is None):
    return {}  # a test file: only its predictions
  return {"accuracy": metrics.accuracy(logits.argmax(-1), [e.label for e in examples])}
