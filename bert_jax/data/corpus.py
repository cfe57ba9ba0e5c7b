r"""Pretraining text -> `TokenizedCorpus`: documents of sentences of WordPiece ids.

Two sources, one path:
  * plain files (google-research/bert's format, see prepare.py): one sentence per line, a
    blank line between documents; a new file also starts a new document. Read with
    `tf.data.TextLineDataset`.
  * a `tfds.load` dataset with a text field (wikipedia, bookcorpus, ...): one example is one
    document. Its text is split in-graph: every line is a paragraph, and paragraphs are cut
    into sentences with prepare.py's two regexes.
Both become one tf.data stream of lines (source index, line number, text), where a blank
line ends a document. The stream is checked for UTF-8, tokenized in batches by the in-graph
tokenizer (`tokenizer.tokenize(tf.string [N]) -> tf.RaggedTensor int32 [N, (pieces)]`) and
packed with numpy into a `TokenizedCorpus`, once per run.

Layout (D documents, S sentences, N tokens):
  token_ids        int32 [N]      all sentences' WordPiece ids, back to back
  sentence_starts  int64 [S + 1]  sentence s is token_ids[sentence_starts[s]:sentence_starts[s + 1]]
  document_starts  int64 [D + 1]  document d is sentences document_starts[d]:document_starts[d + 1]
A document's sentences are contiguous, so a run of whole sentences is one slice of
token_ids; nsp_pairs.py builds instances as such slices.

Errors (`CorpusError`, each naming the files): a pattern that matches no file, a line that
is not valid UTF-8 (file and line number), a corpus with no sentence, with fewer than two
documents, or with no document of two or more sentences (no IsNext pair possible). Non-blank
lines that tokenize to nothing are dropped and counted in `skipped_lines`. Literal
"[CLS]", "[SEP]", "[PAD]" or "[MASK]" in the text (which the tokenizer maps to the special
ids) are dropped, so that only the pipeline places special tokens.
"""
import dataclasses
import glob
import os
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import tensorflow as tf

from bert_jax.data import paths
from bert_jax.data import prepare

_TOKENIZE_BATCH_LINES = 2048


class Tokenizer(Protocol):
  pad_id: int
  cls_id: int
  sep_id: int
  mask_id: int

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor: ...


class CorpusError(ValueError):
  """Input text that cannot make a pretraining corpus; the message names the source."""


@dataclasses.dataclass(frozen=True)
class TokenizedCorpus:
  """Documents of sentences of token ids, in the flat layout of the module docstring."""
  token_ids: np.ndarray        # int32 [N]
  sentence_starts: np.ndarray  # int64 [S + 1]
  document_starts: np.ndarray  # int64 [D + 1]
  sources: tuple[str, ...]     # what was read, for messages
  skipped_lines: int = 0       # non-blank lines without a single WordPiece

  @property
  def num_documents(self) -> int:
    return len(self.document_starts) - 1

  @property
  def num_sentences(self) -> int:
    return len(self.sentence_starts) - 1

  @property
  def num_tokens(self) -> int:
    return len(self.token_ids)

  def document_sentences(self, document: int) -> list[np.ndarray]:
    first, last = self.document_starts[document], self.document_starts[document + 1]
    starts = self.sentence_starts
    return [self.token_ids[starts[s]:starts[s + 1]] for s in range(first, last)]

  def select_documents(self, documents: Sequence[int]) -> "TokenizedCorpus":
    """A corpus of the given documents, in the given order."""
    token_pieces, sentence_lengths, document_lengths = [], [], []
    for d in documents:
      first, last = self.document_starts[d], self.document_starts[d + 1]
      token_pieces.append(
          self.token_ids[self.sentence_starts[first]:self.sentence_starts[last]])
      sentence_lengths.append(np.diff(self.sentence_starts[first:last + 1]))
      document_lengths.append(last - first)
    return TokenizedCorpus(
        token_ids=_concatenate(token_pieces, np.int32),
        sentence_starts=_starts(_concatenate(sentence_lengths, np.int64)),
        document_starts=_starts(np.asarray(document_lengths, np.int64)),
        sources=self.sources)

  def save(self, path: str) -> None:
    """Writes an .npz (atomically: a temporary file, then a rename)."""
    temporary = path + ".tmp.npz"
    np.savez(temporary, token_ids=self.token_ids, sentence_starts=self.sentence_starts,
             document_starts=self.document_starts, sources=np.array(self.sources),
             skipped_lines=self.skipped_lines)
    os.replace(temporary, path)

  @classmethod
  def load(cls, path: str) -> "TokenizedCorpus":
    with np.load(path) as arrays:
      return cls(token_ids=arrays["token_ids"], sentence_starts=arrays["sentence_starts"],
                 document_starts=arrays["document_starts"],
                 sources=tuple(str(s) for s in arrays["sources"]),
                 skipped_lines=int(arrays["skipped_lines"]))

  def check_usable_for_nsp(self) -> None:
    """Raises CorpusError unless IsNext and NotNext pairs can both be built."""
    where = _describe(self.sources)
    if self.num_sentences == 0:
      raise CorpusError(f"empty corpus: no sentence in {where}")
    if self.num_documents < 2:
      raise CorpusError(
          f"{where} holds a single document; NotNext pairs need at least two. Documents "
          "are separated by a blank line (python -m bert_jax.data.prepare converts raw text).")
    if np.diff(self.document_starts).max() < 2:
      raise CorpusError(
          f"every one of the {self.num_documents} documents in {where} has a single "
          "sentence, so no IsNext pair can be built. The plain format wants one sentence "
          "per line and blank lines only between documents (see bert_jax.data.prepare).")


def expand_file_patterns(patterns: Sequence[str], data_dir: str | None) -> list[str]:
  """Globs (relative to the data root unless absolute) -> sorted files; each must match."""
  if not patterns:
    raise CorpusError("no file patterns given")
  files = []
  for pattern in patterns:
    resolved = paths.resolve(data_dir, pattern)
    matches = sorted(glob.glob(resolved))
    if not matches:
      raise CorpusError(f"file pattern '{pattern}' (resolved to '{resolved}') matches no file")
    files.extend(os.path.abspath(match) for match in matches)
  return files


def read_files(files: Sequence[str], tokenizer: Tokenizer) -> TokenizedCorpus:
  """Plain-format files (see expand_file_patterns) -> TokenizedCorpus."""
  files = list(files)
  lines = tf.data.Dataset.from_tensor_slices(files).enumerate().flat_map(_numbered_lines)
  return tokenize_lines(lines, tokenizer, tuple(files),
                        lambda source, line: f"{files[source]}:{line + 1}")


def read_tfds(name: str, split: str, text_field: str, tokenizer: Tokenizer,
              tfds_data_dir: str | None = None) -> TokenizedCorpus:
  """A tfds dataset whose examples are documents in `text_field` -> TokenizedCorpus."""
  import tensorflow_datasets as tfds  # Only this path needs it.
  examples = tfds.load(name, split=split, data_dir=tfds_data_dir, shuffle_files=False)
  label = f"tfds {name}/{split}"

  def sentences_then_blank(index, example):
    if text_field not in example:
      raise CorpusError(f"{label} has no text field '{text_field}'; fields: {list(example)}")
    sentences = tfds_text_to_sentences(example[text_field])
    lines = tf.concat([sentences, [""]], axis=0)
    return tf.data.Dataset.from_tensor_slices(
        (tf.zeros_like(lines, tf.int64), tf.fill(tf.shape(lines), index), lines))

  lines = examples.enumerate().flat_map(sentences_then_blank)
  return tokenize_lines(lines, tokenizer, (label,),
                        lambda source, line: f"{label} example {line}")


def tfds_text_to_sentences(text: tf.Tensor) -> tf.Tensor:
  """A document's text (scalar) -> its sentences [S], by prepare.split_sentences's rule.

  Invalid UTF-8 passes through unchanged, so tokenize_lines can report it.
  """
  text = tf.strings.regex_replace(text, prepare.ABBREVIATION, prepare.ABBREVIATION_REPLACEMENT)
  text = tf.strings.regex_replace(
      text, prepare.SENTENCE_BOUNDARY, prepare.SENTENCE_BOUNDARY_REPLACEMENT)
  text = tf.strings.regex_replace(text, prepare.ABBREVIATION_GUARD, " ")
  pieces = tf.strings.strip(tf.strings.split(text, "\n"))
  pieces = tf.strings.regex_replace(pieces, r"[ \t\r\f\v]+", " ")
  return tf.boolean_mask(pieces, tf.strings.length(pieces) > 0)


def tokenize_lines(lines: tf.data.Dataset, tokenizer: Tokenizer, sources: tuple[str, ...],
                   describe_line: Callable[[int, int], str]) -> TokenizedCorpus:
  """(source index, line number, text) lines -> TokenizedCorpus.

  A blank line, or a change of source, ends a document. `describe_line(source, line)`
  names a line in the invalid-UTF-8 error.
  """
  batches = (lines.batch(_TOKENIZE_BATCH_LINES)
             .map(lambda s, n, t: _tokenize_batch(s, n, t, tokenizer),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
             .prefetch(2))
  columns = {key: [] for key in ("source", "blank", "length", "ids")}
  for batch in batches.as_numpy_iterator():
    invalid = np.flatnonzero(~batch["valid"])
    if invalid.size:
      first = invalid[0]
      location = describe_line(int(batch["source"][first]), int(batch["line"][first]))
      raise CorpusError(f"{location}: invalid UTF-8")
    for key in columns:
      columns[key].append(batch[key])
  if not columns["source"]:
    raise CorpusError(f"empty corpus: no line in {_describe(sources)}")
  source, blank, length, ids = (np.concatenate(columns[k]) for k in columns)
  return _pack(source, blank, length, ids, sources)


def _numbered_lines(source_index: tf.Tensor, path: tf.Tensor) -> tf.data.Dataset:
  return tf.data.TextLineDataset(path).enumerate().map(
      lambda line_number, text: (source_index, line_number, text))


def _tokenize_batch(source, line_number, text, tokenizer):
  # source, line_number, text: [L]; ids: [sum of lengths].
  valid = tf.equal(text, tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace"))
  blank = tf.equal(tf.strings.length(tf.strings.strip(text)), 0)
  pieces = tokenizer.tokenize(tf.where(valid & ~blank, text, ""))
  structural = [tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]
  pieces = tf.ragged.boolean_mask(
      pieces, tf.reduce_all(pieces[..., None] != tf.constant(structural, pieces.dtype), -1))
  return {"source": source, "line": line_number, "valid": valid, "blank": blank,
          "length": tf.cast(pieces.row_lengths(), tf.int64),
          "ids": tf.cast(pieces.flat_values, tf.int32)}


def _pack(source, blank, length, ids, sources) -> TokenizedCorpus:
  """Per-line columns [L] (ids [sum of length]) -> TokenizedCorpus, vectorized."""
  new_source = np.concatenate([[True], source[1:] != source[:-1]])
  document_of_line = np.cumsum(blank | new_source)  # a blank line opens a new (maybe empty) one
  is_sentence = ~blank & (length > 0)
  skipped_lines = int(np.sum(~blank & (length == 0)))
  sentence_documents = document_of_line[is_sentence]
  opens_document = np.concatenate(
      [[True], sentence_documents[1:] != sentence_documents[:-1]])[:len(sentence_documents)]
  document_starts = np.append(np.flatnonzero(opens_document), len(sentence_documents))
  return TokenizedCorpus(
      token_ids=ids.astype(np.int32),  # blank and dropped lines hold no ids
      sentence_starts=_starts(length[is_sentence]),
      document_starts=document_starts.astype(np.int64),
      sources=sources, skipped_lines=skipped_lines)


def _starts(lengths: np.ndarray) -> np.ndarray:
  return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def _concatenate(arrays: list[np.ndarray], dtype) -> np.ndarray:
  return np.concatenate(arrays).astype(dtype) if arrays else np.zeros([0], dtype)


def _describe(sources: Sequence[str], limit: int = 4) -> str:
  shown = ", ".join(sources[:limit])
  return shown + (f" and {len(sources) - limit} more" if len(sources) > limit else "")
