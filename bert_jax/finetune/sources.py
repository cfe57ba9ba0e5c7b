"""Where fine-tuning data comes from: a file under the data root, or a tfds dataset.

Every task reader (glue, conll, squad, swag) takes a *source* string:
  * a file path, absolute or relative to the data root (`paths.resolve`), keeping the
    layout of ../shared/data, e.g. "glue/MNLI/k-shot/16-13/train.tsv";
  * or "tfds:<name>", e.g. "tfds:glue/sst2", "tfds:squad/v2.0", "tfds:conll2003". The
    reader maps its own split names (train/dev/test...) onto the tfds split names.
  * the user's own data (finetune/classify_reader.py) may also name a Hugging Face dataset,
    "hf:<folder or name>" (`load_hf`; DATASET_LOADERS reads either kind by its prefix).

Bad input raises `DataFormatError`, whose message starts with "<path>:<line>: " (or a
JSON location for SQuAD) so the offending row can be found.

Every reader's `load_split(config_like, ...)` reads options with `config_get`, so a
plain dict and an ml_collections.ConfigDict both work.
"""
from collections.abc import Iterator, Mapping
import os
from typing import Any

import numpy as np

from bert_jax.files import storage
from bert_jax.text import paths

TFDS_PREFIX = "tfds:"
HF_PREFIX = "hf:"


class DataFormatError(ValueError):
  """A task file (or tfds record) that does not have the expected format."""


class Skips:
  """A file's bad records (rows, sentences, questions): an error at the first (skip=False),
  or counted and printed once (skip=True: config.data.skip_bad_rows). hint: the error says
  how to skip (a config with config.data.skip_bad_rows)."""

  def __init__(self, path: str, skip: bool, unit: str = "rows", hint: bool = True):
    self.path, self.skip, self.unit, self.hint = path, skip, unit, hint
    self.count, self.first, self.kept = 0, "", 0

  def bad(self, where: str, reason: str) -> None:
    self.bad_message(f"{where}: {reason}")

  def bad_message(self, message: str) -> None:
    """`message` ("<file>:<line>: what is wrong") raised, or counted."""
    if not self.skip:
      hint = (f" (config.data.skip_bad_rows=true skips such {self.unit})" if self.hint
              else "")
      raise DataFormatError(message + hint)
    self.count += 1
    self.first = self.first or message

  def note(self) -> str:
    """The file's skips in one line ("" when none)."""
    if not self.count:
      return ""
    return (f"{self.path}: skipped {self.count} bad {self.unit} of {self.count + self.kept} "
            f"(skip_bad_rows); the first: {self.first}")

  def report(self, kept: int) -> None:
    """Prints the note, once the file is read (`kept` records kept)."""
    self.kept = kept
    if self.count:
      print(self.note(), flush=True)


def is_tfds(source: str) -> bool:
  return source.startswith(TFDS_PREFIX)


def tfds_name(source: str) -> str:
  """"tfds:glue/sst2" -> "glue/sst2"."""
  if not is_tfds(source):
    raise ValueError(f"Not a tfds source: {source!r} (expected '{TFDS_PREFIX}<name>').")
  return source[len(TFDS_PREFIX):]


def resolve_file(source: str, data_dir: str | None) -> str:
  """The absolute path of a file source (a URL's object copied to a local file first,
  storage.local_copy, for the readers' open()); FileNotFoundError if it is missing."""
  path = paths.resolve(data_dir, source, urls=True)
  if not (storage.exists(path) and not storage.isdir(path)):
    raise FileNotFoundError(f"Task file not found: {path}")
  return storage.local_copy(path)


def user_file(path: str) -> str:
  """`path` itself, a user's own file (configs/classify.py, tag.py): as given, relative to the
  current directory, not the data root (a URL's object copied to a local file first);
  FileNotFoundError saying so when it is missing."""
  if storage.is_url(path):
    if not storage.exists(path):
      raise FileNotFoundError(f"{path}: no such object")
    return storage.local_copy(path)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: no such file (relative paths are read from the current "
                            f"directory, {os.getcwd()}, not the data root)")
  return path


def read_lines(path: str) -> Iterator[tuple[int, str]]:
  """(1-based line number, text) for each line, split on '\\n' only.

  A UTF-8 byte-order mark is dropped, as are a trailing '\\r' and the missing final
  newline of files like CoLA's dev.tsv. Lone '\\r' inside a line is kept (Python's
  universal newlines would split there). Raises DataFormatError on an empty file.
  """
  with open(path, "rb") as f:
    line_number = 0
    for line_number, raw in enumerate(f, start=1):
      if line_number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
      try:
        text = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}:{line_number}: not valid UTF-8 ({e}).") from None
      yield line_number, text.rstrip("\n").rstrip("\r")
    if line_number == 0:
      raise DataFormatError(f"{path}:1: the file is empty.")


def load_tfds(name: str, split: str, data_dir: str | None = None):
  """(iterator of numpy examples, tfds DatasetInfo) for `tfds.load(name, split)`."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  dataset, info = tfds.load(name, split=split, data_dir=data_dir, with_info=True,
                            shuffle_files=False)
  return tfds.as_numpy(dataset), info


def load_hf(name: str, split: str):
  """(records as dicts, {feature name: datasets feature}) of split `split` of a Hugging Face
  dataset: a folder `Dataset(Dict).save_to_disk` wrote, else a name for
  `datasets.load_dataset` (the Hub, or its cache offline). Needs the `datasets` package."""
  try:
    import datasets  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ValueError(f"{HF_PREFIX}{name}: reading a Hugging Face dataset needs the `datasets` "
                     "package (pip install datasets)") from None
  if os.path.isdir(name):
    loaded = datasets.load_from_disk(name)
    if isinstance(loaded, datasets.Dataset):
      raise ValueError(f"{HF_PREFIX}{name}: a single Dataset, no splits; save a DatasetDict "
                       "({split: Dataset}) there")
  else:
    loaded = datasets.load_dataset(name)
  if split not in loaded:
    raise ValueError(f"{HF_PREFIX}{name}: no split {split!r} (splits: {sorted(loaded)})")
  return loaded[split], dict(loaded[split].features)


def _tfds_records(name: str, split: str):
  records, info = load_tfds(name, split)
  return records, dict(info.features)


# A named dataset's prefix -> (name, split) -> (records as dicts, {feature: its type}).
DATASET_LOADERS = {TFDS_PREFIX: _tfds_records, HF_PREFIX: load_hf}


def dataset_prefix(source: str) -> str | None:
  """The DATASET_LOADERS prefix `source` starts with ("tfds:glue/sst2": "tfds:"), or None (a
  file)."""
  return next((p for p in DATASET_LOADERS if source.startswith(p)), None)


def load_dataset_split(source: str, split: str):
  """(records, features) of split `split` of the named dataset `source` (DATASET_LOADERS)."""
  prefix = dataset_prefix(source)
  return DATASET_LOADERS[prefix](source[len(prefix):], split)


def as_text(value: Any) -> str:
  """A tfds string feature (bytes) as str."""
  return value.decode("utf-8") if isinstance(value, (bytes, np.bytes_)) else str(value)


def config_get(config_like: Mapping[str, Any] | Any, key: str, default: Any = None):
  """`config_like[key]` for a dict or ConfigDict, `default` when absent."""
  getter = getattr(config_like, "get", None)
  if getter is not None:
    return getter(key, default)
  return getattr(config_like, key, default)


def split_source(config_like, split: str, default: str | None = None) -> str:
  """The source of `split` from `config_like.sources` (a split -> source mapping)."""
  sources = config_get(config_like, "sources", None) or {}
  source = sources.get(split, default) if hasattr(sources, "get") else default
  if source is None:
    raise ValueError(f"No source for split {split!r}: set sources[{split!r}] to a file "
                     f"under the data root or '{TFDS_PREFIX}<name>'.")
  return source


def heldout_mask(size: int, count: int, seed, groups=None) -> np.ndarray:
  """[size] bool: a seeded draw of at least `count` rows to hold back, whole groups at a time.

  `groups` ([size] ints, None = every row its own) keeps rows that must not be split
  (e.g. SST-2's phrases of one sentence) on one side: groups are drawn in a seeded random
  order until `count` rows are held, so the last group drawn may take a few more. Without
  groups it is `default_rng(seed).permutation(size)[:count]`.
  """
  groups = np.arange(size) if groups is None else np.asarray(groups)
  if groups.shape != (size,):
    raise ValueError(f"heldout_mask: groups has shape {groups.shape}, expected ({size},)")
  names, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
  order = np.random.default_rng(seed).permutation(len(names))
  taken = order[:int(np.searchsorted(np.cumsum(sizes[order]), count)) + 1]
  return np.isin(inverse, taken)


def unlabeled(examples, has_no_label) -> bool:
  """True when no example has a label (a test split: predictions only, no metrics); some
  labelled and some not is an error naming the first unlabeled example's provenance."""
  missing = [e for e in examples if has_no_label(e)]
  if missing and len(missing) < len(examples):
    raise ValueError(f"{missing[0].provenance}: no label, though {len(examples) - len(missing)} "
                     f"of the split's {len(examples)} examples have one")
  return bool(missing)
