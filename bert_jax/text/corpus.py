r"""Pretraining text -> `TokenizedCorpus`: documents of sentences of WordPiece ids.

Two sources, one path:
  * plain files (google-research/bert's format, see prepare.py): one sentence per line, a
    blank line between documents; a new file also starts a new document. Read with
    `tf.data.TextLineDataset`.
  * a `tfds.load` dataset with a text field (wikipedia, bookcorpus, ...): one example is one
    document. Its text is split in-graph: every line is a paragraph, and paragraphs are cut
    into sentences with sentences.py's two regexes.
Both become one tf.data stream of lines (source index, line number, text), where a blank
line ends a document. The stream is checked for UTF-8, tokenized in batches by the in-graph
tokenizer (`tokenizer.tokenize(tf.string [N]) -> tf.RaggedTensor int32 [N, (pieces)]`) and
packed with numpy into a `TokenizedCorpus`, once per run.

Layout (D documents, S sentences, N tokens):
  token_ids        int32 [N]      all sentences' WordPiece ids, back to back
  sentence_starts  int64 [S + 1]  sentence s is token_ids[sentence_starts[s]:sentence_starts[s + 1]]
  document_starts  int64 [D + 1]  document d is sentences document_starts[d]:document_starts[d + 1]
  document_ids     int64 [D]      each document's number in its source stream
Documents are numbered 0, 1, ... in stream order (every run of non-blank lines counts,
even one that tokenizes to nothing) before anything is dropped: a reader can keep only
some documents (a `DocumentFilter` of their ids, e.g. one data shard's) and skip
tokenizing the rest, and the ids stay those of the whole stream.
A document's sentences are contiguous, so a run of whole sentences is one slice of
token_ids; nsp_pairs.py builds instances as such slices.

Errors (`CorpusError`, each naming the files): a pattern that matches no file or matches
a directory, a line that is not valid UTF-8 (file and line number), a corpus with no
sentence, with fewer than two documents, or with no document of two or more sentences (no
IsNext pair possible). Non-blank lines that tokenize to nothing are dropped and counted in
`skipped_lines`.

Span annotations (spans.py; config.data.spans): with a span file beside each plain file,
every token also gets its span tag, `span_tags` int8 [N] beside token_ids. Each line is
then tokenized word by word as well (its whitespace-separated words, what spans count)
to place the tags; a line whose word-by-word pieces differ from its own pieces (a
tokenizer that joins words) is an error naming it. Literal "[CLS]", "[SEP]", "[PAD]" or "[MASK]" in the text (which the
tokenizer maps to the special ids) are dropped, so that only the pipeline places special
tokens.
"""
from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from bert_jax.files import storage
from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.text import paths
from bert_jax.text import sentences
from bert_jax.text import spans as spans_lib

_TOKENIZE_BATCH_LINES = 2048


class Tokenizer(Protocol):
  pad_id: int
  cls_id: int
  sep_id: int
  mask_id: int

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor: ...


DocumentFilter = Callable[["tf.Tensor"], "tf.Tensor"]  # document ids int64 [L] -> keep bool [L]


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
  document_ids: np.ndarray | None = None  # int64 [D]: numbers in the source (see module doc)
  span_tags: np.ndarray | None = None     # int8 [N]: each token's span tag (spans.py), or None

  def __post_init__(self):
    if self.document_ids is None:
      object.__setattr__(self, "document_ids", np.arange(self.num_documents, dtype=np.int64))

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
    """A corpus of the given documents (positions, not ids), in the given order."""
    token_slices, sentence_lengths, document_lengths = [], [], []
    for d in documents:
      first, last = self.document_starts[d], self.document_starts[d + 1]
      token_slices.append(slice(self.sentence_starts[first], self.sentence_starts[last]))
      sentence_lengths.append(np.diff(self.sentence_starts[first:last + 1]))
      document_lengths.append(last - first)
    tags = None
    if self.span_tags is not None:
      tags = _concatenate([self.span_tags[s] for s in token_slices], np.int8)
    return TokenizedCorpus(
        token_ids=_concatenate([self.token_ids[s] for s in token_slices], np.int32),
        sentence_starts=_starts(_concatenate(sentence_lengths, np.int64)),
        document_starts=_starts(np.asarray(document_lengths, np.int64)),
        sources=self.sources,
        document_ids=self.document_ids[np.asarray(documents, np.int64)], span_tags=tags)

  def tags_as_tokens(self) -> "TokenizedCorpus":
    """The corpus with its span tags in place of the token ids: an example builder lays
    it out as it lays out the ids, so each row's tags sit beside its tokens."""
    return dataclasses.replace(self, token_ids=self.span_tags.astype(np.int32))

  def select_document_ids(self, wanted: Callable[[np.ndarray], np.ndarray]) -> "TokenizedCorpus":
    """The documents whose id `wanted(document_ids) -> bool [D]` accepts, in order."""
    return self.select_documents(np.flatnonzero(wanted(self.document_ids)))

  def save(self, path: str) -> None:
    """Writes an .npz, whole (`storage.write_bytes`: on disk a temporary file, renamed)."""
    tags = {} if self.span_tags is None else {"span_tags": self.span_tags}
    data = io.BytesIO()
    np.savez(data, token_ids=self.token_ids, sentence_starts=self.sentence_starts,
             document_starts=self.document_starts, sources=np.array(self.sources),
             skipped_lines=self.skipped_lines, document_ids=self.document_ids, **tags)
    storage.write_bytes(path, data.getvalue())

  @classmethod
  def load(cls, path: str) -> "TokenizedCorpus":
    with np.load(io.BytesIO(storage.read_bytes(path))) as arrays:
      return cls(token_ids=arrays["token_ids"], sentence_starts=arrays["sentence_starts"],
                 document_starts=arrays["document_starts"],
                 sources=tuple(str(s) for s in arrays["sources"]),
                 skipped_lines=int(arrays["skipped_lines"]),
                 document_ids=arrays["document_ids"],
                 span_tags=arrays["span_tags"] if "span_tags" in arrays else None)

  def check_usable_for_nsp(self) -> None:
    """Raises CorpusError unless IsNext and NotNext pairs can both be built."""
    where = _describe(self.sources)
    if self.num_sentences == 0:
      raise CorpusError(f"empty corpus: no sentence in {where}")
    if self.num_documents < 2:
      raise CorpusError(
          f"{where} holds a single document; NotNext pairs need at least two. Documents "
          "are separated by a blank line (python -m bert_jax.text.prepare converts raw text).")
    if np.diff(self.document_starts).max() < 2:
      raise CorpusError(
          f"every one of the {self.num_documents} documents in {where} has a single "
          "sentence, so no IsNext pair can be built. The plain format wants one sentence "
          "per line and blank lines only between documents (see bert_jax.text.prepare).")


def expand_file_patterns(patterns: Sequence[str], data_dir: str | None,
                         field: str = "file patterns") -> list[str]:
  """Globs (relative to the data root unless absolute) -> sorted files; each must match.

  A directory is an error; `field` (e.g. "config.data.train_files") names the patterns'
  origin in its message.
  """
  if not patterns:
    raise CorpusError("no file patterns given")
  files = []
  for pattern in patterns:
    resolved = paths.resolve(data_dir, pattern, urls=True)
    matches = [storage.absolute(match) for match in storage.glob(resolved)]
    if not matches:
      raise CorpusError(f"file pattern '{pattern}' (resolved to '{resolved}') matches no file")
    for match in matches:
      if storage.isdir(match):
        raise CorpusError(f"{field}: {match} is a directory; give files or a glob such as "
                          f"{storage.join(match, '*.txt')}")
    files.extend(matches)
  return files


@dataclasses.dataclass(frozen=True)
class LineSource:
  """Text as one tf.data stream of (source index, line number, text) lines.

  A blank line, or a change of source, ends a document. `describe_line(source, line)`
  names a line in error messages. spans: per source, every line's span annotations
  (spans.read_span_file), or None.
  """
  lines: tf.data.Dataset
  sources: tuple[str, ...]
  describe_line: Callable[[int, int], str]
  spans: tuple[list, ...] | None = None


def file_lines(files: Sequence[str], with_spans: bool = False) -> LineSource:
  """Plain-format files (see expand_file_patterns) as a LineSource; with_spans: with the
  span files beside them (spans.py)."""
  files = list(files)
  if any(storage.is_url(f) for f in files):
    lines = _streamed_lines(files)
  else:
    lines = tf.data.Dataset.from_tensor_slices(files).enumerate().flat_map(
        tf.autograph.experimental.do_not_convert(_numbered_lines))
  spans = tuple(spans_lib.read_span_file(f) for f in files) if with_spans else None
  return LineSource(lines, tuple(files), lambda source, line: f"{files[source]}:{line + 1}",
                    spans)


def tfds_lines(name: str, split: str, text_field: str,
               tfds_data_dir: str | None = None) -> LineSource:
  """A tfds dataset whose examples are documents in `text_field`, as a LineSource."""
  import tensorflow_datasets as tfds  # Only this path needs it.
  examples = tfds.load(name, split=split, data_dir=tfds_data_dir, shuffle_files=False)
  label = f"tfds {name}/{split}"

  @tf.autograph.experimental.do_not_convert
  def sentences_then_blank(index, example):
    if text_field not in example:
      raise CorpusError(f"{label} has no text field '{text_field}'; fields: {list(example)}")
    sentences = tfds_text_to_sentences(example[text_field])
    lines = tf.concat([sentences, [""]], axis=0)
    return tf.data.Dataset.from_tensor_slices(
        (tf.zeros_like(lines, tf.int64), tf.fill(tf.shape(lines), index), lines))

  return LineSource(examples.enumerate().flat_map(sentences_then_blank), (label,),
                    lambda source, line: f"{label} example {line}")


def read_files(files: Sequence[str], tokenizer: Tokenizer,
               keep: DocumentFilter | None = None) -> TokenizedCorpus:
  """Plain-format files -> TokenizedCorpus (of the documents `keep` accepts)."""
  return tokenize_lines(file_lines(files), tokenizer, keep)


def read_tfds(name: str, split: str, text_field: str, tokenizer: Tokenizer,
              tfds_data_dir: str | None = None,
              keep: DocumentFilter | None = None) -> TokenizedCorpus:
  """A tfds dataset whose examples are documents -> TokenizedCorpus."""
  return tokenize_lines(tfds_lines(name, split, text_field, tfds_data_dir), tokenizer, keep)


def tfds_text_to_sentences(text: tf.Tensor) -> tf.Tensor:
  """A document's text (scalar) -> its sentences [S], by sentences.split_sentences's rule.

  Invalid UTF-8 passes through unchanged, so tokenize_lines can report it.
  """
  text = tf.strings.regex_replace(text, sentences.ABBREVIATION, sentences.ABBREVIATION_REPLACEMENT)
  text = tf.strings.regex_replace(
      text, sentences.SENTENCE_BOUNDARY, sentences.SENTENCE_BOUNDARY_REPLACEMENT)
  text = tf.strings.regex_replace(text, sentences.ABBREVIATION_GUARD, " ")
  pieces = tf.strings.strip(tf.strings.split(text, "\n"))
  pieces = tf.strings.regex_replace(pieces, r"[ \t\r\f\v]+", " ")
  return tf.boolean_mask(pieces, tf.strings.length(pieces) > 0)


def count_documents(source: LineSource) -> int:
  """How many documents the source holds (the ids run 0 .. count - 1); reads, no tokenizing."""
  last_ids = _numbered_line_batches(source.lines).map(tf.autograph.experimental.do_not_convert(
      lambda batch: tf.reduce_max(batch["document"])))
  return int(last_ids.reduce(tf.constant(-1, tf.int64), tf.maximum)) + 1


def tokenize_lines(source: LineSource, tokenizer: Tokenizer,
                   keep: DocumentFilter | None = None) -> TokenizedCorpus:
  """A LineSource -> TokenizedCorpus of the documents `keep` accepts (default: all).

  Documents are numbered before anything is dropped, so a document's id does not depend
  on `keep`; lines of dropped documents are never tokenized. Every line is checked for
  UTF-8, so all readers of one source raise the same error. A source with spans gives
  a corpus with span_tags.
  """
  with_words = source.spans is not None
  batches = (_numbered_line_batches(source.lines)
             .map(tf.autograph.experimental.do_not_convert(
                      lambda batch: _tokenize_batch(batch, tokenizer, keep, with_words)),
                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
             .prefetch(2))
  columns = {key: [] for key in ("document", "length", "ids") + (_WORD_COLUMNS if with_words
                                                                else ())}
  any_line = False
  for batch in batches.as_numpy_iterator():
    any_line = True
    invalid = np.flatnonzero(~batch["valid"])
    if invalid.size:
      first = invalid[0]
      location = source.describe_line(int(batch["source"][first]), int(batch["line"][first]))
      raise CorpusError(f"{location}: invalid UTF-8")
    for key in columns:
      columns[key].append(batch[key])
  if not any_line:
    raise CorpusError(f"empty corpus: no line in {_describe(source.sources)}")
  document, length, ids = (np.concatenate(columns[k]) for k in ("document", "length", "ids"))
  tags = None
  if with_words:
    tags = _span_tags(source, length, ids,
                      *(np.concatenate(columns[k]) for k in _WORD_COLUMNS))
  return _pack(document, length, ids, source.sources, tags)


_WORD_COLUMNS = ("kept_source", "kept_line", "words_per_line", "pieces_per_word", "word_ids")


def _span_tags(source: LineSource, length, ids, kept_source, kept_line, words_per_line,
               pieces_per_word, word_ids) -> np.ndarray:
  """int8 [sum of length]: the tokens' span tags, from each kept line's spans placed on its
  word-by-word pieces, which must be the line's own pieces."""
  line_of_word = np.repeat(np.arange(len(length)), words_per_line)
  pieces_by_words = np.bincount(line_of_word, weights=pieces_per_word, minlength=len(length))
  same = pieces_by_words == length
  if same.all() and not np.array_equal(word_ids, ids):
    line_of_piece = np.repeat(np.arange(len(length)), length)
    same[line_of_piece[word_ids != ids]] = False
  for i in np.flatnonzero(~same)[:1]:
    location = source.describe_line(int(kept_source[i]), int(kept_line[i]))
    raise CorpusError(f"{location}: its pieces word by word differ from the line's own; "
                      "span annotations need a tokenizer that splits at whitespace first "
                      "(WordPiece)")
  tags = np.zeros(len(ids), np.int8)
  piece_start, word_start = _starts(length), _starts(words_per_line)
  for i in range(len(length)):
    line_spans = source.spans[int(kept_source[i])][int(kept_line[i])]
    if not line_spans:
      continue
    num_words = int(words_per_line[i])
    if max(end for _, end, _ in line_spans) > num_words:
      location = source.describe_line(int(kept_source[i]), int(kept_line[i]))
      raise CorpusError(f"{location}: the tokenizer splits it into {num_words} words, fewer "
                        "than its spans count")
    tags[piece_start[i]:piece_start[i + 1]] = spans_lib.piece_tags(
        spans_lib.word_tags(line_spans, num_words),
        pieces_per_word[word_start[i]:word_start[i + 1]])
  return tags


def _numbered_lines(source_index: tf.Tensor, path: tf.Tensor) -> tf.data.Dataset:
  return tf.data.TextLineDataset(path).enumerate().map(tf.autograph.experimental.do_not_convert(
      lambda line_number, text: (source_index, line_number, text)))


def _streamed_lines(files: Sequence[str]) -> tf.data.Dataset:
  """TextLineDataset's lines (without "\n" or "\r\n"), each file read through
  `bert_jax.files.storage` by a Python generator: TensorFlow's own GCS client reaches only
  Google's endpoint, the layer reaches whatever gcsfs is pointed at (a TPU VM's bucket or
  a local server)."""
  def lines():
    for index, path in enumerate(files):
      with storage.open_file(path, "rb") as f:
        for number, line in enumerate(f):
          line = line[:-1] if line.endswith(b"\n") else line
          yield index, number, line[:-1] if line.endswith(b"\r") else line
  scalar = lambda dtype: tf.TensorSpec([], dtype)  # noqa: E731
  return tf.data.Dataset.from_generator(
      lines, output_signature=(scalar(tf.int64), scalar(tf.int64), scalar(tf.string)))


def _numbered_line_batches(lines: tf.data.Dataset) -> tf.data.Dataset:
  """Lines -> batches of them with each line's document id (-1 for blank lines).

  A non-blank line opens a document when the line before it is blank or from another
  source. One scan step per batch carries (previous blank, previous source, count).
  """
  @tf.autograph.experimental.do_not_convert
  def number(state, line_batch):
    source, line, text = line_batch
    previous_blank, previous_source, count = state
    blank = tf.equal(tf.strings.length(tf.strings.strip(text)), 0)
    after_blank = tf.concat([[previous_blank], blank[:-1]], axis=0)
    after_source = tf.concat([[previous_source], source[:-1]], axis=0)
    opens = tf.cast(~blank & (after_blank | (after_source != source)), tf.int64)
    document = tf.where(blank, tf.constant(-1, tf.int64), count + tf.cumsum(opens) - 1)
    state = (blank[-1], source[-1], count + tf.reduce_sum(opens))
    return state, {"source": source, "line": line, "text": text, "blank": blank,
                   "document": document}
  start = (tf.constant(True), tf.constant(-1, tf.int64), tf.constant(0, tf.int64))
  return lines.batch(_TOKENIZE_BATCH_LINES).scan(start, number)


def _tokenize_batch(batch, tokenizer, keep, with_words: bool = False):
  # Every column [L]; document, length [K kept lines]; ids [sum of length]. with_words:
  # kept_source, kept_line, words_per_line [K]; pieces_per_word [words]; word_ids [pieces].
  text = batch["text"]
  valid = tf.equal(text, tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace"))
  kept = ~batch["blank"]
  if keep is not None:
    kept &= keep(batch["document"])
  kept_text = tf.boolean_mask(tf.where(valid, text, ""), kept)
  pieces = _without_structural(tokenizer.tokenize(kept_text), tokenizer)
  out = {"source": batch["source"], "line": batch["line"], "valid": valid,
         "document": tf.boolean_mask(batch["document"], kept),
         "length": tf.cast(pieces.row_lengths(), tf.int64),
         "ids": tf.cast(pieces.flat_values, tf.int32)}
  if with_words:
    words = tf.strings.split(kept_text)  # [K, (words)]
    word_pieces = _without_structural(tokenizer.tokenize(words.flat_values), tokenizer)
    out.update(kept_source=tf.boolean_mask(batch["source"], kept),
               kept_line=tf.boolean_mask(batch["line"], kept),
               words_per_line=words.row_lengths(),
               pieces_per_word=tf.cast(word_pieces.row_lengths(), tf.int64),
               word_ids=tf.cast(word_pieces.flat_values, tf.int32))
  return out


def _without_structural(pieces: tf.RaggedTensor, tokenizer) -> tf.RaggedTensor:
  """[N, (pieces)] less the literal [PAD]/[CLS]/[SEP]/[MASK] (module docstring)."""
  structural = [tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]
  return tf.ragged.boolean_mask(
      pieces, tf.reduce_all(pieces[..., None] != tf.constant(structural, pieces.dtype), -1))


def _pack(document, length, ids, sources, tags=None) -> TokenizedCorpus:
  """Kept non-blank lines' document ids and lengths [K] (ids, tags [sum of length]) ->
  corpus."""
  is_sentence = length > 0
  sentence_documents = document[is_sentence]
  opens_document = np.concatenate(
      [[True], sentence_documents[1:] != sentence_documents[:-1]])[:len(sentence_documents)]
  document_starts = np.append(np.flatnonzero(opens_document), len(sentence_documents))
  return TokenizedCorpus(
      token_ids=ids.astype(np.int32),  # lines without pieces hold no ids
      sentence_starts=_starts(length[is_sentence]),
      document_starts=document_starts.astype(np.int64),
      sources=sources, skipped_lines=int(np.sum(~is_sentence)),
      document_ids=sentence_documents[opens_document].astype(np.int64), span_tags=tags)


def _starts(lengths: np.ndarray) -> np.ndarray:
  return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def _concatenate(arrays: list[np.ndarray], dtype) -> np.ndarray:
  return np.concatenate(arrays).astype(dtype) if arrays else np.zeros([0], dtype)


def _describe(sources: Sequence[str], limit: int = 4) -> str:
  shown = ", ".join(sources[:limit])
  return shown + (f" and {len(sources) - limit} more" if len(sources) > limit else "")
