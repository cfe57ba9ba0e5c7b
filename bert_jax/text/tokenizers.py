"""The run's one tokenizer, from the config: the single place that decides which one.

  tokenizer = make_tokenizer(config.data, model_dir=config.init_from,
                             kinds=families.tokenizer_kinds(model_config.family))

The kind comes from the config or the family, never from the files alone. `KINDS` names
each kind: the files a folder of it holds, how it is read (with its options: lowercasing,
special-token layout) and the vocab_path file ending it reads:
  "wordpiece"       vocab.txt (BERT), lowercasing per tokenizer_config.json, or per
                    config.data.lower_case for a vocab_path file
  "bpe"             vocab.json + merges.txt (RoBERTa's byte-level BPE; keeps the text)
  "sentencepiece"   spiece.model (or one other *.model): ALBERT's layout ([CLS], [SEP],
                    [MASK] pieces) and options (lowercasing, accents)
  "tokenizer_json"  tokenizer.json alone: that HF fast tokenizer as it is (ModernBERT's;
                    tokenizer_json.py)
The kinds a run may read are config.data.tokenizer when set (one name of KINDS), else the
family's (`bert_jax.models.families.Family.tokenizers`, the released kind first). The
source is config.data.vocab_path (relative to the data root) when set, else the folder
of the model being loaded (an HF folder, a bert_jax workdir or saved model, the folder
of a TF checkpoint). A folder must hold the files of exactly one of those kinds; a
vocab_path file must end as one of them reads. Else a one-line error names the source
and what was expected. A new kind is one entry in KINDS (`register_kind`), named by a
family's `tokenizers` or config.data.tokenizer.
"""
import dataclasses
import hashlib
import os
from typing import Any, Callable

from bert_jax.files import hub
from bert_jax.files import storage
from bert_jax.text import paths
from bert_jax.text.bpe import BPETokenizer
from bert_jax.text.sentencepiece_vocab import SentencePieceTokenizer
from bert_jax.text.tokenizer_json import TokenizerJson
from bert_jax.text.subword import SubwordTokenizer
from bert_jax.text.wordpiece import WordPieceTokenizer


@dataclasses.dataclass(frozen=True)
class Kind:
  """One tokenizer kind.

  title: its name in messages ("WordPiece").
  files: a folder's file names -> the ones that hold this kind ([] none).
  expected: what a folder of it holds, for errors ("vocab.txt").
  from_folder: folder -> the tokenizer (options from its tokenizer_config.json).
  extension: the ending of a vocab_path file it reads ("" none);
  from_file: (that file, config.data) -> the tokenizer.
  """
  title: str
  files: Callable[[set], list]
  expected: str
  from_folder: Callable[[str], SubwordTokenizer]
  extension: str = ""
  from_file: Callable[[str, Any], SubwordTokenizer] | None = None


def _model_files(names: set) -> list:
  """A SentencePiece folder's *.model file(s)."""
  return sorted(n for n in names if n.endswith(".model"))


KINDS = {
    "wordpiece": Kind(
        "WordPiece", lambda names: ["vocab.txt"] if "vocab.txt" in names else [], "vocab.txt",
        WordPieceTokenizer.from_pretrained_dir, ".txt",
        lambda path, data: WordPieceTokenizer(path, lower_case=data.lower_case)),
    "bpe": Kind(
        "byte-level BPE", lambda names: ["vocab.json", "merges.txt"]
        if {"vocab.json", "merges.txt"} <= names else [], "vocab.json + merges.txt",
        BPETokenizer.from_pretrained_dir, ".json",
        lambda path, data: BPETokenizer(path, os.path.join(os.path.dirname(path),
                                                           "merges.txt"))),
    "sentencepiece": Kind(
        "SentencePiece", _model_files, "spiece.model", SentencePieceTokenizer.from_pretrained_dir, ".model",
        lambda path, data: SentencePieceTokenizer(path, lower_case=data.lower_case)),
    # Only where no vocabulary file of another kind is beside it (HF saves both).
    "tokenizer_json": Kind(
        "tokenizer.json", lambda names: ["tokenizer.json"] if "tokenizer.json" in names and not (
            {"vocab.txt", "vocab.json"} & names or _model_files(names)) else [],
        "tokenizer.json alone", TokenizerJson.from_pretrained_dir),
}
# What a source is read as when no family or config names its kinds (a bare folder).
DEFAULT_KINDS = ("wordpiece", "bpe", "sentencepiece", "tokenizer_json")


def register_kind(name: str, kind: Kind) -> None:
  """Adds a tokenizer kind (refused when the name is taken); `unregister_kind` undoes it."""
  if name in KINDS:
    raise ValueError(f"tokenizer kind {name!r} is already in KINDS")
  KINDS[name] = kind


def unregister_kind(name: str) -> None:
  KINDS.pop(name, None)


def check_kinds(kinds, where: str) -> tuple[str, ...]:
  """The kinds, each a name of KINDS; else a one-line error naming `where` they come from."""
  unknown = [kind for kind in kinds if kind not in KINDS]
  if unknown or not kinds:
    raise ValueError(f"{where}: tokenizer kind(s) {unknown or list(kinds)} not in "
                     f"{sorted(KINDS)}")
  return tuple(kinds)


def _expected(kinds) -> str:
  return ", ".join(f"{KINDS[kind].expected} ({KINDS[kind].title})" for kind in kinds)


def folder_kind(folder: str, kinds=DEFAULT_KINDS) -> tuple[str, list[str]]:
  """(kind, its files) of the one tokenizer of `kinds` in a folder.

  Raises:
    FileNotFoundError: the folder holds none of them (or is no folder).
    ValueError: it holds more than one.
  """
  names = set(os.listdir(folder)) if os.path.isdir(folder) else set()
  found = {kind: KINDS[kind].files(names) for kind in check_kinds(kinds, folder)}
  found = {kind: files for kind, files in found.items() if files}
  expected = f"expected exactly one of {_expected(kinds)}"
  if not found:
    raise FileNotFoundError(f"no tokenizer in {folder}; {expected}")
  if len(found) > 1:
    held = " and ".join(f"{KINDS[kind].title} ({', '.join(files)})"
                        for kind, files in found.items())
    raise ValueError(f"{folder} holds {held}; {expected}")
  return next(iter(found.items()))


def run_kinds(data_config, kinds=DEFAULT_KINDS) -> tuple[str, ...]:
  """config.data.tokenizer when set (one kind), else `kinds` (the family's)."""
  if data_config.get("tokenizer"):
    return check_kinds((data_config.tokenizer,), "config.data.tokenizer")
  return check_kinds(kinds, "the family's tokenizers")


def _file_kind(path: str, kinds) -> str:
  """The first of `kinds` that reads a vocab_path file ending as `path` does."""
  for kind in kinds:
    if KINDS[kind].extension and path.endswith(KINDS[kind].extension):
      return kind
  readable = [f"a {KINDS[k].extension} file ({k})" for k in kinds if KINDS[k].extension]
  raise ValueError(f"config.data.vocab_path={path}: not a vocabulary of the expected kind; "
                   f"expected {' or '.join(readable + ['a folder'])}")


def _vocab_source(data_config, model_dir: str) -> str:
  """The vocab_path (resolved) or the model's folder that the tokenizer comes from."""
  if data_config.get("vocab_path"):
    path = paths.resolve(data_config.get("data_dir"), data_config.vocab_path, urls=True)
    if not storage.exists(path):
      raise FileNotFoundError(f"config.data.vocab_path: vocab file not found: {path}")
    return _local_vocab(path)
  if not model_dir:
    raise ValueError("config.data.vocab_path is empty and there is no config.init_from to "
                     "take the vocabulary from")
  return model_folder(model_dir)


def _local_vocab(path: str) -> str:
  """A vocab_path file or folder where the tokenizers' readers open it: a URL's copied
  (storage.local_copy; a BPE vocab.json with the merges.txt beside it)."""
  if storage.is_url(path) and path.endswith(KINDS["bpe"].extension):
    merges = storage.join(storage.parent(path), "merges.txt")
    if storage.exists(merges):
      storage.local_copy(merges)
  return storage.local_copy(path)


def model_folder(model_path: str) -> str:
  """The local folder of a model's tokenizer files: a Hub id's snapshot, a URL's files
  copied (storage.local_copy), the folder of a TF checkpoint prefix."""
  model_path = hub.local_path(model_path)  # a Hub id: its snapshot folder
  if storage.is_url(model_path):
    if not storage.isdir(model_path):
      model_path = storage.parent(model_path)  # a TF checkpoint prefix in a bucket
    return storage.local_copy(model_path)
  return model_path if os.path.isdir(model_path) else os.path.dirname(model_path)


def _resolve(data_config, model_dir: str, kinds) -> tuple[str, str, list[str]]:
  """(source, its kind, the files that hold it) of make_tokenizer's tokenizer."""
  source = _vocab_source(data_config, model_dir)
  kinds = run_kinds(data_config, kinds)
  if not os.path.isdir(source):
    kind = _file_kind(source, kinds)
    beside = [os.path.join(os.path.dirname(source), "merges.txt")] if kind == "bpe" else []
    return source, kind, [source] + beside
  try:
    kind, names = folder_kind(source, kinds)
  except (FileNotFoundError, ValueError) as error:
    where = ("config.data.vocab_path: " if data_config.get("vocab_path")
             else f"config.init_from={model_dir}: set config.data.vocab_path, or ")
    raise type(error)(f"{where}{error}") from None
  files = [os.path.join(source, name) for name in names + ["tokenizer_config.json"]]
  return source, kind, [f for f in files if os.path.isfile(f)]


def make_tokenizer(data_config, model_dir: str = "", kinds=DEFAULT_KINDS) -> SubwordTokenizer:
  """The tokenizer of config.data.vocab_path, or of the folder of `model_dir`, read as
  config.data.tokenizer or else as the one of `kinds` (the family's) that it holds.

  data_config: a run config's `data` (vocab_path, tokenizer, lower_case are read).

  ```python
  import os
  import tempfile
  import ml_collections
  from bert_jax.text.tokenizers import make_tokenizer

  vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
  with open(vocab, "w") as f:
    for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]:
      print(token, file=f)
  data = ml_collections.ConfigDict({"vocab_path": vocab, "tokenizer": "", "lower_case": True})
  tokenizer = make_tokenizer(data)
  assert tokenizer.kind == "wordpiece" and tokenizer.encode(["The cat"]) == [[5, 6]]
  ```
  """
  source, kind, files = _resolve(data_config, model_dir, kinds)
  if os.path.isdir(source):
    tokenizer = KINDS[kind].from_folder(source)
  else:
    tokenizer = KINDS[kind].from_file(source, data_config)
  tokenizer.source, tokenizer.kind, tokenizer.source_files = source, kind, tuple(files)
  return tokenizer


def model_tokenizer(model_path: str, kinds=DEFAULT_KINDS) -> SubwordTokenizer:
  """The tokenizer saved with a model: in its folder (an HF folder of any family, a
  bert_jax workdir or saved model) or beside its file (a TF checkpoint); `kinds`: the
  model's family's (`bert_jax.models.families.tokenizer_kinds`); a Hub id: the tokenizer
  of its snapshot (`bert_jax.files.hub`).

  ```python
  import os
  import tempfile
  from bert_jax.text.tokenizers import model_tokenizer

  folder = tempfile.mkdtemp()  # a model folder: here only its vocab.txt
  with open(os.path.join(folder, "vocab.txt"), "w") as f:
    for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]:
      print(token, file=f)
  tokenizer = model_tokenizer(folder)
  batch = tokenizer.encode_for_model(["the cat"], max_length=6)
  assert batch["input_ids"].tolist() == [[2, 5, 6, 3, 0, 0]]  # [CLS] the cat [SEP] pad pad
  ```
  """
  folder = model_folder(model_path)
  kind, _ = folder_kind(folder, kinds)
  return KINDS[kind].from_folder(folder)


def vocab_fingerprint(data_config, tokenizer: SubwordTokenizer | None = None) -> str:
  """sha256 of the vocabulary file(s) behind `tokenizer` (make_tokenizer's: from
  config.data.vocab_path or init_from's folder), else behind config.data.vocab_path read
  as make_tokenizer reads it without a family (for caches)."""
  files = tokenizer.source_files if tokenizer is not None else ()
  if not files:
    files = _resolve(data_config, "", DEFAULT_KINDS)[2]
  digest = hashlib.sha256()
  for file in files:
    with open(file, "rb") as f:
      digest.update(f.read())
  return digest.hexdigest()
