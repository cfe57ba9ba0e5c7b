r"""Any HF fast tokenizer saved as `tokenizer.json` alone (ModernBERT's, most recent Hub models).

  tok = TokenizerJson.from_pretrained_dir("path/to/ModernBERT-base")
  batch = tok.encode_for_model(["a sentence"], ["its pair"], max_length=128)

Folders with a vocabulary file of their own (vocab.txt, vocab.json + merges.txt, a
SentencePiece model) take that kind's tokenizer (bert_jax/text/tokenizers.py); a folder with
only `tokenizer.json` takes this one. The Rust `tokenizers` pipeline the file describes runs
as it is (normaliser, pre-tokeniser, model), so the ids are transformers' own; the special
tokens' roles come from `tokenizer_config.json` / `special_tokens_map.json` (cls_token or
bos_token, sep_token or eos_token, pad_token, mask_token, unk_token), and the pair layout
from the file's post-processor: BERT's `[CLS] A [SEP] B [SEP]` (BertProcessing, or a
TemplateProcessing of that shape, e.g. ModernBERT's), RoBERTa's `<s> A </s></s> B </s>`.

Word starts (whole-word masking, pretraining's continuation table) follow the model:
WordPiece's continuing-subword prefix, a byte-level pre-tokeniser's `Ġ`, a Metaspace `▁`.
Like the BPE and SentencePiece kinds it runs in front of the graph (`python_tokenize`).
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Sequence

import numpy as np
import tokenizers

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.text import subword

FILE = "tokenizer.json"
SETTINGS = ("tokenizer_config.json", "special_tokens_map.json")
# Our role -> the settings' keys that may name its token, in order of preference.
ROLES = {"pad": ("pad_token",), "unk": ("unk_token",), "cls": ("cls_token", "bos_token"),
         "sep": ("sep_token", "eos_token"), "mask": ("mask_token",)}


def _settings(folder: str) -> dict:
  merged = {}
  for name in SETTINGS:
    path = os.path.join(folder, name)
    if os.path.isfile(path):
      with open(path, encoding="utf-8") as f:
        merged = {**json.load(f), **merged}  # tokenizer_config.json first, the map fills in
  return merged


def _token(value) -> str | None:
  """A settings entry: a string, or an AddedToken dict with its "content"."""
  return value.get("content") if isinstance(value, dict) else value


def _pair_layout(processor: dict | None, cls: str, sep: str, path: str) -> tuple[int, int]:
  """(separators between A and B, token type of B) of a post-processor, or a one-line error."""
  kind = (processor or {}).get("type")
  if kind == "BertProcessing":
    return 1, 1
  if kind == "RobertaProcessing":
    return 2, 0
  if kind == "TemplateProcessing":
    pieces = [(("Sequence", p["Sequence"]["id"], p["Sequence"]["type_id"]) if "Sequence" in p
               else ("SpecialToken", p["SpecialToken"]["id"], p["SpecialToken"]["type_id"]))
              for p in processor["pair"]]
    names = [name for _, name, _ in pieces]
    if (names[0] == cls and names[-1] == sep and "A" in names and "B" in names
        and all(n == sep for n in names[names.index("A") + 1:names.index("B")])
        and names.index("B") == len(names) - 2):
      return names.index("B") - names.index("A") - 1, pieces[names.index("B")][2]
  raise ValueError(f"{path}: post_processor {kind!r} is not '{cls} A {sep} B {sep}' or RoBERTa's "
                   "layout; the model inputs cannot be built")


class TokenizerJson(subword.SubwordTokenizer):
  """An HF `tokenizer.json` behind the `WordPieceTokenizer` interface.

  Attributes: vocab (tokens by id; an id the file does not use is ""), vocab_size,
  pad_id / unk_id / cls_id / sep_id / mask_id, lower_case and strips_accents (what the
  file's normaliser does to "A" and "é").
  """

  def __init__(self, folder: str):
    path = os.path.join(folder, FILE)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"no {FILE} in {folder}")
    with open(path, encoding="utf-8") as f:
      self._json = json.load(f)
    self._folder, self._tokenizer = folder, tokenizers.Tokenizer.from_file(path)
    ids = self._tokenizer.get_vocab(with_added_tokens=True)
    self.vocab = [""] * (max(ids.values()) + 1)
    for token, i in ids.items():
      self.vocab[i] = token
    self.vocab_size = len(self.vocab)
    settings = _settings(folder)
    for role, keys in ROLES.items():
      token = next((_token(settings[k]) for k in keys if settings.get(k)), None)
      if token is None or self._tokenizer.token_to_id(token) is None:
        raise ValueError(f"{folder}: {' / '.join(SETTINGS)} name no {role} token in the "
                         f"vocabulary ({' or '.join(keys)})")
      setattr(self, f"{role}_id", self._tokenizer.token_to_id(token))
    self.pair_separators, self.second_type_id = _pair_layout(
        self._json.get("post_processor"), self.vocab[self.cls_id], self.vocab[self.sep_id], path)
    normalizer = self._tokenizer.normalizer
    self.lower_case = bool(normalizer) and normalizer.normalize_str("A") == "a"
    self.strips_accents = bool(normalizer) and normalizer.normalize_str("\u00e9") == "e"

  @classmethod
  def from_pretrained_dir(cls, path: str) -> "TokenizerJson":
    return cls(path)

  def save(self, folder: str) -> None:
    """Copies tokenizer.json and its settings files (what transformers' AutoTokenizer reads)."""
    os.makedirs(folder, exist_ok=True)
    for name in (FILE,) + SETTINGS:
      source = os.path.join(self._folder, name)
      if os.path.isfile(source) and os.path.abspath(source) != os.path.abspath(
          os.path.join(folder, name)):
        shutil.copyfile(source, os.path.join(folder, name))

  def _encode_batch(self, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor | tf.Tensor:
    """Strings [N] -> int32 ids [N, (pieces)]; runs in front of the graph."""
    return subword.python_tokenize(self._encode_batch, texts)

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """Each word after a space, as inside running text (a byte-level `Ġword`)."""
    return self.encode([" " + word for word in words])

  def decode(self, ids: Sequence[int]) -> str:
    return self._tokenizer.decode([int(i) for i in ids if int(i) != self.pad_id],
                                  skip_special_tokens=False)

  def continuation_table(self) -> np.ndarray:
    """bool [V]: the pieces that continue a word, by the file's model / pre-tokeniser."""
    model = self._json.get("model", {})
    if model.get("type") == "WordPiece":
      prefix = model.get("continuing_subword_prefix") or "##"
      return np.array([t.startswith(prefix) for t in self.vocab], bool)
    described = json.dumps([self._json.get("pre_tokenizer"), self._json.get("normalizer")])
    marker = next((m for kind, m in (("ByteLevel", "\u0120"), ("Metaspace", "\u2581"))
                   if kind in described), None)
    if marker is None:
      raise ValueError(f"{self._folder}/{FILE}: no word-start rule for its pre-tokenizer "
                       "(WordPiece, ByteLevel and Metaspace have one)")
    special = {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id}
    return np.array([bool(t) and not t.startswith(marker) and i not in special
                     and not (t[0], t[-1]) in (("[", "]"), ("<", ">"))
                     for i, t in enumerate(self.vocab)], bool)
