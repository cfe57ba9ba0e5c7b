"""What every tokenizer kind shares: the special tokens, vocabulary files, the model's
`[CLS] a [SEP] (b [SEP])` packing, and the `SubwordTokenizer` base class with
`python_tokenize` for kinds whose reference is a Python library.

  class MyTokenizer(SubwordTokenizer):   # sets vocab, lower_case; _set_special_ids()
    def tokenize(self, texts): ...       # strings [N] -> int32 ids [N, (pieces)], tf.data
    def decode(self, ids): ...
    def save(self, folder): ...

`wordpiece.py` (in-graph, BERT's), `bpe.py`, `sentencepiece_vocab.py` and
`tokenizer_json.py` are the kinds (`tokenizers.KINDS` names them).
"""
from __future__ import annotations

import abc
import itertools
import os
from typing import Callable, Iterable, Sequence

import numpy as np
import tokenizers

from bert_jax.startup.lazy import tensorflow as tf

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)


# ------------------------------------------------------------------------------------
# Vocabulary files.
# ------------------------------------------------------------------------------------
def read_vocab(vocab_path: str, required: Sequence[str] = SPECIAL_TOKENS) -> list[str]:
  """Reads a one-token-per-line vocab file; the line number (from 0) is the id.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: the file is empty, repeats a token, or lacks a `required` token. The
      message is one line naming the path and the problem.
  """
  if not os.path.isfile(vocab_path):
    raise FileNotFoundError(f"Vocab file not found: {vocab_path}")
  with open(vocab_path, encoding="utf-8") as f:
    vocab = [line.rstrip("\r\n") for line in f]
  if not vocab:
    raise ValueError(f"Vocab file {vocab_path} is empty.")
  first_line = {}
  for line_number, token in enumerate(vocab):
    if token in first_line:
      raise ValueError(
          f"Vocab file {vocab_path} repeats token {token!r} on lines "
          f"{first_line[token] + 1} and {line_number + 1}.")
    first_line[token] = line_number
  missing = [token for token in required if token not in first_line]
  if missing:
    raise ValueError(
        f"Vocab file {vocab_path} lacks the special token(s) {', '.join(missing)}.")
  return vocab


# ------------------------------------------------------------------------------------
# Sequence packing shared by every tokenizer: [CLS] a [SEP] (b [SEP]), truncate, pad.
# ------------------------------------------------------------------------------------
def truncated_pair_lengths(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
  """Lengths to keep of a pair under Hugging Face's 'longest_first' truncation.

  While the pair is too long, the longer side gives up tokens. When both sides end up
  truncated, each keeps half the budget and, for an odd budget, the extra token goes to
  the side that was longer (to `b` on a tie). BERT's `_truncate_seq_pair` gives the
  extra token to `a` on a tie; Hugging Face's ids are the reference here.
  """
  if len_a + len_b <= budget:
    return len_a, len_b
  shorter, longer = sorted((len_a, len_b))
  if shorter > budget // 2:
    keep_shorter, keep_longer = budget // 2, budget - budget // 2
  else:
    keep_shorter, keep_longer = shorter, budget - shorter
  if len_a > len_b:
    return keep_longer, keep_shorter
  return keep_shorter, keep_longer


def pack_for_model(ids_a: Sequence[Sequence[int]],
                   ids_b: Sequence[Sequence[int]] | None, max_length: int, *,
                   cls_id: int, sep_id: int, pad_id: int, pair_separators: int = 1,
                   second_type_id: int = 1) -> dict[str, np.ndarray]:
  """Builds padded `[CLS] a [SEP] (b [SEP])` model inputs, each int32 [N, max_length].

  BERT and ALBERT put one [SEP] between a pair and give b token type 1; RoBERTa's
  `<s> a </s></s> b </s>` is `pair_separators=2, second_type_id=0`.
  """
  num_special = 2 if ids_b is None else 2 + pair_separators
  if max_length < num_special:
    raise ValueError(f"max_length={max_length} leaves no room for the {num_special} "
                     "special tokens.")
  if ids_b is not None and len(ids_b) != len(ids_a):
    raise ValueError(f"Got {len(ids_a)} first and {len(ids_b)} second segments.")
  budget = max_length - num_special
  input_ids = np.full((len(ids_a), max_length), pad_id, np.int32)
  token_type_ids = np.zeros((len(ids_a), max_length), np.int32)
  attention_mask = np.zeros((len(ids_a), max_length), np.int32)
  for row, a in enumerate(ids_a):
    b = None if ids_b is None else ids_b[row]
    if b is None:
      keep_a, keep_b = min(len(a), budget), 0
    else:
      keep_a, keep_b = truncated_pair_lengths(len(a), len(b), budget)
    ids = [cls_id, *a[:keep_a], sep_id]
    if b is not None:
      ids += [sep_id] * (pair_separators - 1) + [*b[:keep_b], sep_id]
      token_type_ids[row, keep_a + 2:len(ids)] = second_type_id
    input_ids[row, :len(ids)] = ids
    attention_mask[row, :len(ids)] = 1
  return {"input_ids": input_ids, "token_type_ids": token_type_ids,
          "attention_mask": attention_mask}


class SubwordTokenizer(abc.ABC):
  """What every tokenizer offers: `tokenize` for tf.data, plus eager helpers on top of it.

  Subclasses set `vocab` and `lower_case`, call `_set_special_ids()`, and implement
  `tokenize` and `decode`; a layout other than BERT's `[CLS] a [SEP] b [SEP]` with
  token types 0/1 overrides `pair_separators` and `second_type_id` (see `pack_for_model`).
  """
  vocab: list[str]
  lower_case: bool
  strips_accents: bool = False  # Whether the text loses its accents (combining marks).
  source: str = ""  # The vocabulary file or folder it was made from (keys corpus caches).
  kind: str = ""  # Its name in text/tokenizers.py's KINDS, when make_tokenizer made it.
  source_files: tuple[str, ...] = ()  # The files of `source` it was read from.
  pair_separators: int = 1
  second_type_id: int = 1

  def _set_special_ids(self, tokens: Sequence[str] = SPECIAL_TOKENS):
    """Sets `vocab_size` and `pad_id, unk_id, cls_id, sep_id, mask_id` from `vocab`."""
    index = {token: i for i, token in enumerate(self.vocab)}
    self.vocab_size = len(self.vocab)
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        index[token] for token in tokens)

  @abc.abstractmethod
  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Strings [N] -> int32 ids [N, (pieces)], no special tokens added.

    In-graph, or in front of the graph through `python_tokenize`; either way usable in
    `tf.data.Dataset.map`.
    """

  @abc.abstractmethod
  def decode(self, ids: Sequence[int]) -> str:
    """Readable text for ids (debugging display; not an exact inverse)."""

  @abc.abstractmethod
  def save(self, folder: str) -> None:
    """Writes the files its kind reads back (a trained model's workdir holds them)."""

  def continuation_table(self) -> np.ndarray | None:
    """bool [V]: which pieces continue a word, where the tokenizer says so itself (a kind
    with its own word marks); None: by its class (`pretrain.masking.WORD_RULES`)."""
    return None

  def fast_tokenizer(self) -> tokenizers.Tokenizer | None:
    """This tokenizer as an HF `tokenizers.Tokenizer` with the model's special-token layout
    as its post-processor (what a `tokenizer.json` holds: transformers 5 loads ModernBERT's
    tokenizer only from one), or None where none is built here."""
    return None

  def save_tokenizer_json(self, folder: str) -> None:
    """Writes `tokenizer.json` (`fast_tokenizer`) into `folder`, when there is one."""
    fast = self.fast_tokenizer()
    if fast is not None:
      fast.save(os.path.join(folder, "tokenizer.json"))

  def encode(self, texts: Sequence[str]) -> list[list[int]]:
    """Eager `tokenize` on Python strings: one list of ids per text."""
    if isinstance(texts, (str, bytes)):
      raise TypeError("encode takes a sequence of strings, not a single string.")
    texts = list(texts)
    if not texts:
      return []
    return self.tokenize(tf.constant(texts, tf.string)).to_list()

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """Each text's ids as it reads inside running text, after a space (word-level tasks).

    For texts split on whitespace (CoNLL's words, SQuAD's context words and answers).
    Here the same as `encode`; a tokenizer whose pieces carry the space before a word
    (byte-level BPE's `Ġ`) overrides it.
    """
    return self.encode(words)

  def span_text(self, ids: Sequence[int]) -> str:
    """The normalised text that a run of pieces spells, single spaces between words.

    With `normalized_words`, what SQuAD's postprocessing aligns to the context's own
    characters (`squad_postprocess.project_to_original`).
    """
    return " ".join(self.decode(ids).split())

  def normalized_words(self, words: Sequence[str]) -> list[list[str]]:
    """Each whitespace-free word's normalised text, as the words `span_text` separates."""
    return [[self.span_text(ids)] for ids in self.encode_words(words)]

  def encode_for_model(self, texts_a: Sequence[str],
                       texts_b: Sequence[str] | None = None,
                       max_length: int = 128) -> dict[str, np.ndarray]:
    """`[CLS] a [SEP] (b [SEP])`, longest-first truncated, padded with `pad_id`.

    Returns int32 arrays `input_ids`, `token_type_ids` and `attention_mask`, each of
    shape [N, max_length]: a model's first three call arguments.

    texts_a: N texts. texts_b: N second texts of pairs, or None.
    max_length: T, the row length (the pair is truncated to fit, longest text first).

    ```python
    import os
    import tempfile
    import jax
    from bert_jax import config_for_size
    from bert_jax.models.bert import BertModel
    from bert_jax.text.tokenizers import model_tokenizer

    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
      for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]:
        print(token, file=f)
    tokenizer = model_tokenizer(folder)
    batch = tokenizer.encode_for_model(["the cat sat"], ["the cat"], max_length=10)
    assert batch["input_ids"].tolist() == [[2, 5, 6, 7, 3, 5, 6, 3, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]]

    model = BertModel(config_for_size("tiny", vocab_size=tokenizer.vocab_size))
    variables = model.init(jax.random.key(0), batch["input_ids"])
    out = model.apply(variables, **batch)  # the arrays are the model's arguments, by name
    assert out.sequence_output.shape == (1, 10, 128)
    ```
    """
    ids_b = None if texts_b is None else self.encode(texts_b)
    return pack_for_model(self.encode(texts_a), ids_b, max_length,
                          cls_id=self.cls_id, sep_id=self.sep_id, pad_id=self.pad_id,
                          pair_separators=self.pair_separators,
                          second_type_id=self.second_type_id)


def python_tokenize(encode_batch: Callable[[list[str]], Iterable[Sequence[int]]],
                    texts) -> tf.RaggedTensor | tf.Tensor:
  """Strings [N] -> int32 ids [N, (pieces)] by a Python `encode_batch`, in front of the graph;
  a scalar string gives ids [pieces].

  For tokenizers whose reference is a Python-bound library (HF `tokenizers`,
  `sentencepiece`): `encode_batch(list of str) -> one id sequence per text` runs in a
  `tf.numpy_function`, so it works in `tf.data.Dataset.map` and eager code alike, but
  holds the GIL around the call and cannot be serialised into a SavedModel. Invalid
  UTF-8 is decoded with U+FFFD replacements.
  """
  texts = tf.convert_to_tensor(texts, tf.string)
  if texts.shape.rank == 0:
    return python_tokenize(encode_batch, texts[tf.newaxis])[0]

  def run(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = [list(row) for row in encode_batch(
        [text.decode("utf-8", errors="replace") for text in batch.tolist()])]
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    ids = np.fromiter(itertools.chain.from_iterable(rows), np.int32, int(lengths.sum()))
    return ids, lengths

  ids, lengths = tf.numpy_function(run, [texts], (tf.int32, tf.int64), stateful=False)
  ids.set_shape([None])
  lengths.set_shape([None])
  return tf.RaggedTensor.from_row_lengths(ids, lengths, validate=False)
