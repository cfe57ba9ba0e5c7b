"""The run's one tokenizer, from the config: the single place that decides which one.

  tokenizer = make_tokenizer(config.data, model_dir=config.init_from)

The kind follows from the vocabulary's files:
  config.data.vocab_path (relative to the data root), when set:
    a .txt file     WordPiece vocab.txt (BERT), lowercasing per config.data.lower_case
    a .model file   SentencePiece model (ALBERT), lowercasing per config.data.lower_case,
                    accents kept
    a .json file    byte-level BPE vocab.json (RoBERTa), with merges.txt beside it;
                    config.data.lower_case does not apply (byte-level BPE keeps the text)
    a folder        by what it holds, as below
  otherwise the folder of the model being loaded (an HF folder, a bert_jax workdir or
  saved model, the folder of a TF checkpoint), by what it holds, with the settings of its
  tokenizer_config.json:
    vocab.txt                 WordPiece
    vocab.json + merges.txt   byte-level BPE
    spiece.model (or one other *.model)   SentencePiece
    tokenizer.json alone      that HF fast tokenizer as it is (ModernBERT's; tokenizer_json.py)
A folder with none of these, or with more than one of the first three, is an error.
"""
import hashlib
import os

from bert_jax.text import paths
from bert_jax.text.bpe import BPETokenizer
from bert_jax.text.sentencepiece_vocab import SentencePieceTokenizer
from bert_jax.text.tokenizer_json import TokenizerJson
from bert_jax.text.wordpiece import SubwordTokenizer
from bert_jax.text.wordpiece import WordPieceTokenizer

# Kind -> (the files in a folder that make it, the loader of such a folder).
FOLDER_KINDS = {
    "WordPiece": (lambda names: ["vocab.txt"] if "vocab.txt" in names else [],
                  WordPieceTokenizer.from_pretrained_dir),
    "byte-level BPE": (
        lambda names: ["vocab.json", "merges.txt"]
        if {"vocab.json", "merges.txt"} <= names else [],
        BPETokenizer.from_pretrained_dir),
    "SentencePiece": (lambda names: sorted(n for n in names if n.endswith(".model")),
                      SentencePieceTokenizer.from_pretrained_dir),
    # Only where no vocabulary file of the kinds above is beside it (HF saves both).
    "tokenizer.json": (lambda names: ["tokenizer.json"] if "tokenizer.json" in names and not (
        {"vocab.txt", "vocab.json"} & names or any(n.endswith(".model") for n in names))
        else [], TokenizerJson.from_pretrained_dir),
}
# A vocab_path file's extension -> its loader, given the path and config.data.
FILE_KINDS = {
    ".txt": lambda path, data_config: WordPieceTokenizer(
        path, lower_case=data_config.lower_case),
    ".model": lambda path, data_config: SentencePieceTokenizer(
        path, lower_case=data_config.lower_case),
    ".json": lambda path, data_config: BPETokenizer(
        path, os.path.join(os.path.dirname(path), "merges.txt")),
}


def folder_kind(folder: str) -> tuple[str, list[str]]:
  """(kind, its files) of the one tokenizer in a folder.

  Raises:
    FileNotFoundError: the folder holds no tokenizer (or is no folder).
    ValueError: it holds more than one kind.
  """
  names = set(os.listdir(folder)) if os.path.isdir(folder) else set()
  found = {kind: files(names) for kind, (files, _) in FOLDER_KINDS.items()}
  found = {kind: files for kind, files in found.items() if files}
  expected = ("expected exactly one of vocab.txt (WordPiece), vocab.json + merges.txt "
              "(BPE), spiece.model (SentencePiece), or tokenizer.json alone (HF fast)")
  if not found:
    raise FileNotFoundError(f"no tokenizer in {folder}; {expected}")
  if len(found) > 1:
    kinds = " and ".join(f"{kind} ({', '.join(files)})" for kind, files in found.items())
    raise ValueError(f"{folder} holds {kinds}; {expected}")
  return next(iter(found.items()))


def _vocab_source(data_config, model_dir: str) -> str:
  """The vocab_path (resolved) or the model's folder that the tokenizer comes from."""
  if data_config.get("vocab_path"):
    path = paths.resolve(data_config.get("data_dir"), data_config.vocab_path)
    if not os.path.exists(path):
      raise FileNotFoundError(f"config.data.vocab_path: vocab file not found: {path}")
    if not os.path.isdir(path) and os.path.splitext(path)[1] not in FILE_KINDS:
      raise ValueError(f"config.data.vocab_path={path}: not a vocabulary; expected a "
                       "WordPiece .txt, a SentencePiece .model, a BPE vocab.json or a folder")
    return path
  if not model_dir:
    raise ValueError("config.data.vocab_path is empty and there is no config.init_from to "
                     "take the vocabulary from")
  return model_dir if os.path.isdir(model_dir) else os.path.dirname(model_dir)


def make_tokenizer(data_config, model_dir: str = "") -> SubwordTokenizer:
  """The tokenizer of config.data.vocab_path, or of the folder of `model_dir`."""
  source = _vocab_source(data_config, model_dir)
  if not os.path.isdir(source):
    tokenizer = FILE_KINDS[os.path.splitext(source)[1]](source, data_config)
  else:
    try:
      kind, _ = folder_kind(source)
    except (FileNotFoundError, ValueError) as error:
      where = ("config.data.vocab_path: " if data_config.get("vocab_path")
               else f"config.init_from={model_dir}: set config.data.vocab_path, or ")
      raise type(error)(f"{where}{error}") from None
    tokenizer = FOLDER_KINDS[kind][1](source)
  tokenizer.source = source
  return tokenizer


def model_tokenizer(model_path: str) -> SubwordTokenizer:
  """The tokenizer saved with a model: in its folder (an HF folder of any family, a
  bert_jax workdir or saved model) or beside its file (a TF checkpoint)."""
  folder = model_path if os.path.isdir(model_path) else os.path.dirname(model_path)
  kind, _ = folder_kind(folder)
  return FOLDER_KINDS[kind][1](folder)


def vocab_fingerprint(data_config, tokenizer: SubwordTokenizer | None = None) -> str:
  """sha256 of the vocabulary file(s) behind `tokenizer` (its `source`, make_tokenizer's:
  config.data.vocab_path or init_from's folder), else behind config.data.vocab_path
  (for caches)."""
  path = (tokenizer.source if tokenizer is not None and tokenizer.source
          else _vocab_source(data_config, model_dir=""))
  if os.path.isdir(path):
    names = folder_kind(path)[1] + ["tokenizer_config.json"]
    files = [os.path.join(path, name) for name in names
             if os.path.isfile(os.path.join(path, name))]
  elif path.endswith(".json"):
    files = [path, os.path.join(os.path.dirname(path), "merges.txt")]
  else:
    files = [path]
  digest = hashlib.sha256()
  for file in files:
    with open(file, "rb") as f:
      digest.update(f.read())
  return digest.hexdigest()
