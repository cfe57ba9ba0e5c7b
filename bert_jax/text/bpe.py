r"""Byte-level BPE (RoBERTa's tokenizer), learned and applied by Hugging Face `tokenizers`.

  tok = BPETokenizer.from_pretrained_dir("runs/vocab/bpe-8k")   # vocab.json + merges.txt
  batch = tok.encode_for_model(["a sentence"], ["its pair"], max_length=128)
  ids = tok.tokenize(tf.constant(["in front of the graph"]))    # tf.RaggedTensor int32

  train_bpe(["runs/corpus/pretrain.txt"], "runs/vocab/bpe-8k", vocab_size=8192)
  # or: python -m bert_jax.text.learn_vocab --kind=bpe --input=... --output=FOLDER

The pipeline is RoBERTa's (GPT-2's byte alphabet): the text's UTF-8 bytes are mapped to
256 printable characters, split by the GPT-2 regex with no prefix space (a leading space
is part of the next word, `Ġ`), and merged by the ranked merges of `merges.txt`. The
encoding itself is the Rust `tokenizers` model built exactly as `transformers`'
`RobertaTokenizer(Fast)` builds it from the same folder (BPE with no subword prefix or
suffix, ByteLevel(add_prefix_space=False)), with the special tokens as added tokens:
written literally in raw text they become their ids (`<mask>` also takes the space to its
left, as roberta-base's does). bench/tokenizer_parity.py --kind=bpe checks the ids
against RobertaTokenizerFast loaded from the saved folder.

Special tokens follow RoBERTa: `<s>`=0 (cls_id), `<pad>`=1, `</s>`=2 (sep_id), `<unk>`=3,
then the learned pieces, and `<mask>` last. `encode_for_model` builds RoBERTa's
`<s> a </s></s> b </s>` with token_type_ids all 0.

`tokenize` is not a TensorFlow graph: it is a `tf.numpy_function` around the Rust
`encode_batch_fast` (`subword.python_tokenize`), so it works in `tf.data.Dataset.map`
and anywhere eager or traced code runs, but it runs in front of the graph, in Python:
it cannot be serialised into a SavedModel, and tf.data's parallel calls share the GIL
around it (the Rust encoder itself runs on all cores).
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Sequence

import tokenizers
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.text import subword

BOS, PAD, EOS, UNK, MASK = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
LEADING_TOKENS = (BOS, PAD, EOS, UNK)  # ids 0-3; MASK is the last id.
VOCAB_FILE, MERGES_FILE = "vocab.json", "merges.txt"
_MERGES_HEADER = "#version: 0.2"


def _added_token(token: str) -> tokenizers.AddedToken:
  """A special token as roberta-base registers it (only <mask> strips on its left)."""
  return tokenizers.AddedToken(token, lstrip=token == MASK, rstrip=False,
                               single_word=False, normalized=False, special=True)


def _added_token_json(token: str) -> dict:
  token = _added_token(token)
  return {"content": token.content, "lstrip": token.lstrip, "rstrip": token.rstrip,
          "single_word": token.single_word, "normalized": token.normalized,
          "special": token.special}


def read_vocab_json(path: str) -> list[str]:
  """vocab.json ({token: id}) -> tokens by id; ids must run 0..V-1 and hold the specials.

  Raises:
    FileNotFoundError: no file at `path`.
    ValueError: one line naming the path: ids not 0..V-1, or a special token missing.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"BPE vocab file not found: {path}")
  with open(path, encoding="utf-8") as f:
    token_ids = json.load(f)
  if sorted(token_ids.values()) != list(range(len(token_ids))):
    raise ValueError(f"BPE vocab {path}: ids are not 0..{len(token_ids) - 1}, each once.")
  vocab = sorted(token_ids, key=token_ids.get)
  expected = {token: i for i, token in enumerate(LEADING_TOKENS)}
  expected[MASK] = len(vocab) - 1
  wrong = [f"{token}={token_ids.get(token)}" for token, i in expected.items()
           if token_ids.get(token) != i]
  if wrong:
    raise ValueError(f"BPE vocab {path}: expected RoBERTa's <s>=0 <pad>=1 </s>=2 <unk>=3 "
                     f"and <mask> last, got {', '.join(wrong)}.")
  return vocab


def read_merges(path: str) -> list[tuple[str, str]]:
  """merges.txt (an optional '#version' line, then one 'left right' pair a line)."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f"BPE merges file not found: {path}")
  with open(path, encoding="utf-8") as f:
    lines = [line.rstrip("\r\n") for line in f]
  if lines and lines[0].startswith("#version"):
    lines = lines[1:]
  merges = [tuple(line.split(" ")) for line in lines if line]
  bad = next((i for i, merge in enumerate(merges) if len(merge) != 2), None)
  if bad is not None:
    raise ValueError(f"BPE merges {path}: line {bad + 2} is not 'left right'.")
  return merges


class BPETokenizer(subword.SubwordTokenizer):
  """RoBERTa's byte-level BPE behind the `WordPieceTokenizer` interface.

  Attributes:
    vocab: the tokens (byte-level strings, 'Ġ' = a leading space); a token's id is its
      index.
    vocab_size: len(vocab).
    pad_id, unk_id, cls_id (<s>), sep_id (</s>), mask_id: ids of the special tokens.
    lower_case: False; byte-level BPE keeps the text as it is.
  """
  pair_separators = 2   # <s> a </s></s> b </s>
  second_type_id = 0    # RoBERTa has no segment embeddings to speak of.

  def __init__(self, vocab_path: str, merges_path: str):
    self.vocab = read_vocab_json(vocab_path)
    self._merges = read_merges(merges_path)
    self.lower_case = False
    self._set_special_ids((PAD, UNK, BOS, EOS, MASK))
    self._tokenizer = tokenizers.Tokenizer(models.BPE(
        vocab={token: i for i, token in enumerate(self.vocab)}, merges=self._merges,
        dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
        fuse_unk=False))
    self._tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    self._tokenizer.decoder = decoders.ByteLevel()
    self._tokenizer.add_special_tokens([_added_token(token)
                                        for token in LEADING_TOKENS + (MASK,)])

  @classmethod
  def from_pretrained_dir(cls, path: str) -> "BPETokenizer":
    """Reads `vocab.json` and `merges.txt` from a folder (ours, or an HF RoBERTa one)."""
    return cls(os.path.join(path, VOCAB_FILE), os.path.join(path, MERGES_FILE))

  def save(self, folder: str) -> None:
    """Writes vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json and
    the same tokenizer as tokenizer.json (`fast_tokenizer`).

    `transformers.RobertaTokenizerFast.from_pretrained(folder)` (or AutoTokenizer, also for
    a ModernBERT folder, which transformers 5 reads only through tokenizer.json) loads them
    into the same tokenizer, `<mask>` with lstrip as in roberta-base.
    """
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, VOCAB_FILE), "w", encoding="utf-8") as f:
      json.dump({token: i for i, token in enumerate(self.vocab)}, f, ensure_ascii=False)
    with open(os.path.join(folder, MERGES_FILE), "w", encoding="utf-8") as f:
      f.write("".join(line + "\n" for line in
                      [_MERGES_HEADER] + [f"{a} {b}" for a, b in self._merges]))
    roles = {"bos_token": BOS, "eos_token": EOS, "sep_token": EOS, "cls_token": BOS,
             "unk_token": UNK, "pad_token": PAD}
    special_ids = (self.cls_id, self.pad_id, self.sep_id, self.unk_id, self.mask_id)
    config = {"tokenizer_class": "RobertaTokenizer", "add_prefix_space": False,
              "trim_offsets": True, "errors": "replace", **roles, "mask_token": MASK,
              "added_tokens_decoder": {str(i): _added_token_json(self.vocab[i])
                                       for i in special_ids}}
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
      json.dump(config, f, indent=2)
    with open(os.path.join(folder, "special_tokens_map.json"), "w", encoding="utf-8") as f:
      json.dump({**roles, "mask_token": _added_token_json(MASK)}, f, indent=2)
    self.save_tokenizer_json(folder)

  def fast_tokenizer(self) -> tokenizers.Tokenizer:
    """This BPE with RoBERTa's `<s> A </s></s> B </s>` (RobertaProcessing), as
    RobertaTokenizerFast builds it from vocab.json + merges.txt."""
    fast = tokenizers.Tokenizer.from_str(self._tokenizer.to_str())
    fast.post_processor = processors.RobertaProcessing(
        (EOS, self.sep_id), (BOS, self.cls_id), trim_offsets=True, add_prefix_space=False)
    return fast

  def _encode_batch(self, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in self._tokenizer.encode_batch_fast(
        texts, add_special_tokens=False)]

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor | tf.Tensor:
    """Strings [N] -> int32 ids [N, (pieces)]; a scalar string gives ids [pieces].

    Runs in front of the graph (`subword.python_tokenize`): usable in tf.data.
    """
    return subword.python_tokenize(self._encode_batch, texts)

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """Each text with the space before it (`Ġword`), as HF RoBERTa encodes split words.

    (`is_split_into_words=True` with `add_prefix_space=True`): a word keeps the ids it
    has inside running text, not those of a text's first word.
    """
    return self.encode([" " + word for word in words])

  def decode(self, ids: Sequence[int]) -> str:
    """The text of the ids (bytes decoded back), <pad> dropped, other specials shown."""
    return self._tokenizer.decode([int(i) for i in ids if int(i) != self.pad_id],
                                  skip_special_tokens=False)


def train_bpe(input_files: Sequence[str], folder: str, vocab_size: int,
              min_frequency: int = 2) -> BPETokenizer:
  """Learns a byte-level BPE vocabulary of `vocab_size` tokens and saves it to `folder`.

  `tokenizers`' BpeTrainer on the ByteLevel pre-tokenizer (all 256 bytes in the initial
  alphabet, so no text is ever unknown), as `ByteLevelBPETokenizer.train` does, with
  RoBERTa's special tokens first and `<mask>` appended last.

  Args:
    input_files: plain text files, one sentence (or paragraph) a line.
    folder: where vocab.json, merges.txt and the HF config files are written.
    vocab_size: the size, special tokens included; fewer if the text runs out of merges.
    min_frequency: pairs seen fewer times are not merged.
  """
  missing = [path for path in input_files if not os.path.isfile(path)]
  if missing:
    raise FileNotFoundError(f"BPE learner input file(s) not found: {missing}")
  if vocab_size <= 256 + len(LEADING_TOKENS) + 1:
    raise ValueError(f"vocab_size {vocab_size} leaves no room for merges beside the 256 "
                     "bytes and the 5 special tokens")
  learner = tokenizers.Tokenizer(models.BPE())
  learner.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  learner.train(list(input_files), trainers.BpeTrainer(
      vocab_size=vocab_size - 1, min_frequency=min_frequency,
      special_tokens=list(LEADING_TOKENS), show_progress=False,
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
  with tempfile.TemporaryDirectory() as scratch:
    learner.model.save(scratch)
    vocab_path = os.path.join(scratch, VOCAB_FILE)
    with open(vocab_path, encoding="utf-8") as f:
      token_ids = json.load(f)
    token_ids[MASK] = len(token_ids)
    with open(vocab_path, "w", encoding="utf-8") as f:
      json.dump(token_ids, f, ensure_ascii=False)
    tokenizer = BPETokenizer(vocab_path, os.path.join(scratch, MERGES_FILE))
  tokenizer.save(folder)
  return tokenizer
