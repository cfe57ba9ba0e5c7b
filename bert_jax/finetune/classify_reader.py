"""The user's own labelled files for classification (finetune/classify.py's task): CSV, TSV,
JSON lines or a named dataset -> examples with their labels, the problem and its classes
inferred from the training labels; predictions written in the files' own format.

API:
  Columns.of(config_data) -> Columns     the column names, label_sep, format and
      skip_bad_rows of config.data (a one-line error for an empty text / label or an
      unknown format)
  read_labelled(path, columns, problem, labels, skips=None, dataset_split="")
      -> (problem, labels, examples)
      path: a file (its format: file_format, by its extension unless columns.format),
      or "tfds:NAME" / "hf:NAME_OR_FOLDER" (split dataset_split); problem "": inferred
      (`infer_problem`); labels None: the file's own classes (`label_names`; the training
      file), else a label outside them is a bad row. examples: ClassifyExample, label a
      class name (single_label), a float (regression) or a tuple of class names
      (multi_label). skips: where bad rows go (sources.Skips; default the file's own).
  read_unlabelled(path, columns, skips=None, dataset_split="") -> list[ClassifyExample]
      the rows of a file to predict (label None; its label column, if any, is not read)
  multi_hot(examples, labels) -> float32 [N, C]   a multi-label file's label rows
  predicted_values(logits, problem, labels) -> one class name, score or list of names per row
  write_predictions(path, fmt, examples, values, label_sep)   `id` (or `line`, `index`)
      and `prediction` per example, in fmt (one of FORMATS; SUFFIXES its file extension)
  PROBLEMS: the kinds of label (single_label, regression, multi_label), each with its
      scores, training metrics and HF problem_type

Formats: CSV as Python's csv module reads it (a header line; quoted fields, "" inside them,
newlines inside quotes), TSV split on tabs only (no quoting, as GLUE's files), JSON lines
(one object per line; a label may be a JSON list). A UTF-8 BOM and blank lines are skipped.
Bad rows: a missing column (a field count other than the header's; a line that is not a
JSON object), an empty text or label, a label that is not a number (regression), a dev
label the training file lacks: the error "<file>:<line>: <what is wrong>", or, with
columns.skip_bad_rows, skipped and counted. A header without a named column is an error
of the file.

The labels (classes) are the training file's, sorted: as numbers when every one is a
number, else as strings.
"""
import csv
import dataclasses
import functools
import json
import math
import os

import numpy as np

from bert_jax.finetune import glue_reader, sources
from bert_jax.finetune.sources import DataFormatError, Skips, read_lines, user_file

EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
# Numeric training labels with more distinct values than this are a regression's scores
# (STS-B's 0-5 in tenths); fewer are classes (0/1, 1-5 stars).
NUMERIC_CLASSES_MAX = 10


@dataclasses.dataclass(frozen=True)
class Problem:
  """One kind of label: the scores (the first picks the epoch), the training metrics and
  HF's name for it (config.json problem_type of the export)."""
  metrics: tuple[str, ...]
  metric_names: tuple[str, ...]
  hf_problem_type: str


PROBLEMS = {"single_label": Problem(("accuracy", "macro_f1"), ("loss", "accuracy"),
                                    "single_label_classification"),
            "regression": Problem(("pearson", "spearman"), ("loss",), "regression"),
            "multi_label": Problem(("micro_f1",), ("loss", "exact_match"),
                                   "multi_label_classification")}


@dataclasses.dataclass(frozen=True)
class ClassifyExample(glue_reader.GlueExample):
  """GLUE's example (label: a class name, a score, a tuple of class names, or None) and
  the row's value of the id column (None without one)."""
  id: str | None = None


class BadRow(ValueError):
  """What is wrong with one row (the reader adds its file:line)."""


@dataclasses.dataclass(frozen=True)
class Columns:
  """Where the fields are, from config.data."""
  text: str
  text_pair: str
  label: str
  id: str
  label_sep: str
  format: str
  skip_bad_rows: bool

  @classmethod
  def of(cls, data) -> "Columns":
    text = lambda field: str(data.get(field) or "")
    columns = cls(text("text"), text("text_pair"), text("label"), text("id"),
                  text("label_sep"), text("format"), bool(data.get("skip_bad_rows")))
    for field in ("text", "label"):
      if not getattr(columns, field):
        raise ValueError(f"config.data.{field} is empty: name the file's {field} column")
    if columns.format and columns.format not in FORMATS:
      raise ValueError(f"config.data.format={columns.format!r}: expected one of "
                       f"{sorted(FORMATS)} (or \"\": by each file's extension)")
    return columns


# ------------------------------------------------------------------------------------
# Reading rows.
# ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Row:
  """One record: its fields by column (None: it could not be read, see `problem`); note:
  what a missing column's message adds (a short row's field count)."""
  fields: dict | None
  where: str  # "<path>:<line>"
  problem: str = ""
  note: str = ""


def _delimited_rows(path: str, delimiter: str, quoting: int):
  """The rows of a file with a header line; a row's line is the one it starts on."""
  with open(path, encoding="utf-8-sig", newline="") as f:
    reader = csv.reader(f, delimiter=delimiter, quoting=quoting)
    header, start = None, 1
    try:
      for fields in reader:
        line, start = start, reader.line_num + 1
        if not fields or fields == [""] or (len(fields) == 1 and not fields[0].strip()):
          continue  # a blank line (a row of empty fields is a row)
        if header is None:
          header = _check_header(fields, f"{path}:{line}")
          yield header
          continue
        width = f"{len(fields)} fields, the header has {len(header)}"
        yield Row(dict(zip(header, fields)), f"{path}:{line}",
                  problem=width if len(fields) > len(header) else "",
                  note=f" ({width})" if len(fields) < len(header) else "")
    except csv.Error as e:
      raise DataFormatError(f"{path}:{reader.line_num}: {e}") from None
    except UnicodeDecodeError as e:
      raise DataFormatError(f"{path}: not valid UTF-8 ({e})") from None
  if header is None:
    raise DataFormatError(f"{path}:1: the file is empty")


def _check_header(fields: list[str], where: str) -> list[str]:
  repeated = sorted({f for f in fields if fields.count(f) > 1})
  if repeated:
    raise DataFormatError(f"{where}: the header names {repeated} more than once")
  return fields


def _csv_rows(path: str):
  return _delimited_rows(path, ",", csv.QUOTE_MINIMAL)


def _tsv_rows(path: str):
  return _delimited_rows(path, "\t", csv.QUOTE_NONE)


def _json_rows(path: str):
  """One JSON object per line; the header is None (each row names its own fields)."""
  yield None
  for line, text in read_lines(path):
    if not text.strip():
      continue
    try:
      value = json.loads(text)
    except json.JSONDecodeError as e:
      yield Row(None, f"{path}:{line}", f"not JSON ({e.msg})")
      continue
    yield (Row(value, f"{path}:{line}") if isinstance(value, dict) else
           Row(None, f"{path}:{line}", f"a JSON {type(value).__name__}, not an object"))


def _dataset_value(value, feature):
  """A named dataset's value as a row field: text as str, a ClassLabel as its class name
  (None for -1, an unlabelled test record's), a sequence as a list, a number as a number."""
  names = getattr(feature, "names", None)
  if names is not None:
    return None if int(value) < 0 else names[int(value)]
  if isinstance(value, (np.ndarray, list, tuple)):
    return [_dataset_value(v, getattr(feature, "feature", None)) for v in value]
  if isinstance(value, (bytes, np.bytes_)):
    return sources.as_text(value)
  return value.item() if isinstance(value, np.generic) else value


def _dataset_rows(source: str, split: str):
  """The records of split `split` of a named dataset ("tfds:NAME", "hf:NAME_OR_FOLDER") as
  rows; the header is its feature names."""
  records, features = sources.load_dataset_split(source, split)
  yield list(features)
  for index, record in enumerate(records):
    yield Row({key: _dataset_value(value, features.get(key)) for key, value in record.items()},
              f"{source}:{split}[{index}]")


FORMATS = {"csv": _csv_rows, "tsv": _tsv_rows, "jsonl": _json_rows}
SUFFIXES = {"csv": ".csv", "tsv": ".tsv", "jsonl": ".jsonl"}  # of a predictions file


def file_format(path: str, forced: str = "") -> str:
  """The format of `path`: `forced`, else by its extension."""
  if forced:
    return forced
  extension = os.path.splitext(path)[1].lower()
  if extension not in EXTENSIONS:
    raise ValueError(f"{path}: the extension {extension!r} names no format (expected one "
                     f"of {sorted(EXTENSIONS)}); set config.data.format to one of "
                     f"{sorted(FORMATS)}")
  return EXTENSIONS[extension]


def _value(row: Row, column: str):
  value = row.fields.get(column)
  if value is None:
    raise BadRow(f"column {column!r} is missing{row.note}")
  return value


def _text(row: Row, column: str) -> str:
  value = _value(row, column)
  if not isinstance(value, str):
    raise BadRow(f"column {column!r} is a JSON {type(value).__name__}, not text")
  if not value.strip():
    raise BadRow(f"column {column!r} is empty")
  return value


def _name(value, column: str) -> str:
  """A label as a class name: text as it is (stripped), a JSON number or bool as JSON."""
  if isinstance(value, (dict, list)) or value is None:
    raise BadRow(f"column {column!r} holds a JSON {type(value).__name__}, not a label")
  name = value.strip() if isinstance(value, str) else json.dumps(value)
  if not name:
    raise BadRow(f"column {column!r} is empty")
  return name


def _raw_label(row: Row, columns: Columns) -> str | tuple[str, ...]:
  """A class name, or a tuple of them (a JSON list; a field split on label_sep)."""
  value = _value(row, columns.label)
  if isinstance(value, list):
    return tuple(_name(v, columns.label) for v in value)
  if columns.label_sep and isinstance(value, str):
    return tuple(v.strip() for v in value.split(columns.label_sep) if v.strip())
  return _name(value, columns.label)


def _row_id(row: Row, columns: Columns) -> str | None:
  """The id column's value (None where the default `id` column is absent)."""
  if not columns.id and "id" not in row.fields:
    return None
  value = _value(row, columns.id or "id")
  return value if isinstance(value, str) else json.dumps(value)


def read_rows(path: str, columns: Columns, labelled: bool, skips: Skips,
              dataset_split: str = "") -> list[ClassifyExample]:
  """The file's examples with their raw labels (`_raw_label`; None unlabelled); path
  "tfds:NAME" or "hf:NAME": split dataset_split of that dataset."""
  if sources.dataset_prefix(path):
    rows = _dataset_rows(path, dataset_split)
    where = f"{path}:{dataset_split}: the features have"
  else:
    local = user_file(path)  # a URL's object: its local copy
    rows = FORMATS[file_format(local, columns.format)](local)
    where = f"{path}:1: the header has"
  header = next(rows)
  needed = [columns.text, columns.text_pair, columns.label if labelled else "", columns.id]
  missing = [c for c in needed if c and header is not None and c not in header]
  if missing:
    raise DataFormatError(f"{where} no column {missing[0]!r} (columns: {header})")
  examples = []
  for row in rows:
    try:
      if row.problem:
        raise BadRow(row.problem)
      examples.append(ClassifyExample(
          f"{len(examples)}", _text(row, columns.text),
          _text(row, columns.text_pair) if columns.text_pair else None,
          _raw_label(row, columns) if labelled else None, row.where, _row_id(row, columns)))
    except BadRow as e:
      skips.bad(row.where, str(e))
  return examples


# ------------------------------------------------------------------------------------
# Labels and the problem.
# ------------------------------------------------------------------------------------
def _number(name) -> float | None:
  """A class name as a finite number, or None."""
  try:
    value = float(name)
  except (TypeError, ValueError):
    return None
  return value if math.isfinite(value) else None


def infer_problem(raw_labels) -> str:
  """multi_label where a label is a list (label_sep, a JSON list); regression where every
  label is a number and they take more than NUMERIC_CLASSES_MAX values; else single_label."""
  if any(isinstance(label, tuple) for label in raw_labels):
    return "multi_label"
  numbers = {_number(label) for label in raw_labels}
  if None not in numbers and len(numbers) > NUMERIC_CLASSES_MAX:
    return "regression"
  return "single_label"


def _check_names(names, labels, column: str) -> None:
  unknown = [n for n in names if labels is not None and n not in labels]
  if unknown:
    raise BadRow(f"column {column!r}: label {unknown[0]!r} is not one of the training "
                 f"file's {list(labels)}")


def _one_label(raw, labels, column: str) -> str:
  if isinstance(raw, tuple):
    raise BadRow(f"column {column!r} holds {len(raw)} labels; one is expected "
                 "(problem_type=multi_label takes several)")
  _check_names([raw], labels, column)
  return raw


def _score(raw, labels, column: str) -> float:
  del labels
  value = None if isinstance(raw, tuple) else _number(raw)
  if value is None:
    raise BadRow(f"column {column!r}: label {raw!r} is not a number (problem_type="
                 "regression)")
  return value


def _label_set(raw, labels, column: str) -> tuple[str, ...]:
  names = raw if isinstance(raw, tuple) else (raw,)  # a lone label: a set of one
  _check_names(names, labels, column)
  return names


CONVERT = {"single_label": _one_label, "regression": _score, "multi_label": _label_set}


def convert_labels(examples, problem: str, labels, column: str,
                   skips: Skips) -> list[ClassifyExample]:
  """The examples with `problem`'s labels (a class name, a score, a tuple of names); a
  label outside `labels` (None: any) is a bad row."""
  kept = []
  for example in examples:
    try:
      label = CONVERT[problem](example.label, labels, column)
      kept.append(dataclasses.replace(example, label=label))
    except BadRow as e:
      skips.bad(example.provenance, str(e))
  return kept


def label_names(examples, problem: str) -> tuple[str, ...] | None:
  """The classes of the training examples, sorted (as numbers when all are); None for a
  regression."""
  if problem == "regression":
    return None
  names = {n for e in examples for n in (e.label if problem == "multi_label" else [e.label])}
  numeric = all(_number(n) is not None for n in names)
  return tuple(sorted(names, key=lambda n: (_number(n), n) if numeric else n))


def multi_hot(examples, labels: tuple[str, ...]) -> np.ndarray:
  """float32 [N, C]: 1 where the example has the class."""
  index = {name: i for i, name in enumerate(labels)}
  rows = np.zeros((len(examples), len(labels)), np.float32)
  for row, example in enumerate(examples):
    rows[row, [index[n] for n in example.label or ()]] = 1.0
  return rows


def read_labelled(path: str, columns: Columns, problem: str, labels,
                  skips: Skips | None = None, dataset_split: str = "") -> tuple[
                      str, tuple[str, ...] | None, list[ClassifyExample]]:
  """(problem, labels, examples) of a labelled file (or dataset split: `read_rows`); problem ""
  is inferred and labels None are the file's own (the training file). skips: where its bad
  rows go (the task's)."""
  skips = skips or Skips(path, columns.skip_bad_rows)
  examples = read_rows(path, columns, True, skips, dataset_split)
  problem = problem or infer_problem([e.label for e in examples])
  if problem not in PROBLEMS:
    raise ValueError(f"config.data.problem_type={problem!r}: expected one of "
                     f"{sorted(PROBLEMS)} (or \"\": inferred)")
  examples = convert_labels(examples, problem, labels, columns.label, skips)
  if not examples:
    raise DataFormatError(f"{path}: no examples (every row skipped, or only a header)")
  skips.report(len(examples))
  names = labels or label_names(examples, problem)
  if problem == "single_label" and len(names) < 2:
    raise DataFormatError(f"{path}: every label is {names[0]!r}; a classifier needs two "
                          "classes or more")
  return problem, names, examples


def read_unlabelled(path: str, columns: Columns, skips: Skips | None = None,
                    dataset_split: str = "") -> list[ClassifyExample]:
  """The examples of a file to predict (its label column, if any, is not read)."""
  skips = skips or Skips(path, columns.skip_bad_rows)
  examples = read_rows(path, columns, False, skips, dataset_split)
  if not examples:
    raise DataFormatError(f"{path}: no examples (every row skipped, or only a header)")
  skips.report(len(examples))
  return examples


# ------------------------------------------------------------------------------------
# Predictions.
# ------------------------------------------------------------------------------------
def _write_delimited(path: str, header: list[str], rows, delimiter: str) -> None:
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)


def _write_json_lines(path: str, header: list[str], rows) -> None:
  with open(path, "w", encoding="utf-8") as f:
    for row in rows:
      f.write(json.dumps(dict(zip(header, row)), ensure_ascii=False) + "\n")


WRITERS = {"csv": functools.partial(_write_delimited, delimiter=","),
           "tsv": functools.partial(_write_delimited, delimiter="\t"),
           "jsonl": _write_json_lines}


def predicted_values(logits: np.ndarray, problem: str, labels) -> list:
  """One prediction per row of logits [N, C]: a class name, a score, or a list of names
  (each class whose logit is above 0)."""
  if problem == "regression":
    return [float(v) for v in logits[:, 0]]
  if problem == "multi_label":
    return [[labels[c] for c in np.flatnonzero(row > 0)] for row in logits]
  return [labels[i] for i in logits.argmax(-1)]


def write_predictions(path: str, fmt: str, examples, values, label_sep: str) -> None:
  """`id` (or `line`) and `prediction` per example, in `fmt`; a list of labels is joined
  with label_sep ("|" when unset) in CSV/TSV."""
  with_ids = all(e.id is not None for e in examples)
  named = any(sources.dataset_prefix(e.provenance) for e in examples)  # "...:split[i]"
  position = lambda e: int(e.provenance.rsplit("[" if named else ":", 1)[1].rstrip("]"))
  keys = [e.id if with_ids else position(e) for e in examples]
  if fmt != "jsonl":
    values = [(label_sep or "|").join(v) if isinstance(v, list) else v for v in values]
  WRITERS[fmt](path, ["id" if with_ids else "index" if named else "line", "prediction"],
               zip(keys, values))

