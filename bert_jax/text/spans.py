"""Span annotations of a plain-format corpus: the entities and phrases that ERNIE's
knowledge masking (Sun et al. 2019) masks as whole units.

The span file of a plain-format text file `X.txt` is `X.spans.jsonl` beside it
(`span_path`): UTF-8 JSON Lines, exactly one line per line of the text file, blank lines
included, each a JSON object

  {"spans": [[start, end, kind], ...]}

over the whitespace-separated words of that text line: words start .. end - 1 (0-based,
end exclusive, 0 <= start < end <= the line's word count), kind "entity" or "phrase". A
blank text line (a document break) has no spans: {} or {"spans": []}. Spans of one kind
do not overlap; an entity may lie inside a phrase (each masking scheme reads its kind).
Example, for the line "Harry Potter lives in the big old house":

  {"spans": [[0, 2, "entity"], [4, 8, "phrase"]]}

`python -m bert_jax.text.prepare --with_spans` carries the span files of plain sources
through to its output (`<output>.spans.jsonl`), and config.data.spans=True makes the
corpus reader (corpus.py) read them: every token gets a tag (`TAG_*` below) that the
example builders lay out beside the token ids and the masking schemes "entity" and
"phrase" read (pretrain/masking.py).

Token tags, int8, one per token: the phrase code plus 3 x the entity code, where a code is
0 outside a span of that kind, 1 at a span's first token, 2 at its other tokens (a span
starting mid-word is impossible: spans are whole words). Bad lines are one-line
`SpanFileError`s naming the file and line. A text file and its span file may be objects
in a bucket (gs://...), read through bert_jax.files.storage.
"""
import json
import os

import numpy as np

from bert_jax.files import storage

SPAN_KINDS = {"phrase": 1, "entity": 3}  # kind -> its code's multiplier in a token tag
OUTSIDE, BEGIN, INSIDE = 0, 1, 2


class SpanFileError(ValueError):
  """A span file that does not annotate its text file; the message names file and line."""


def span_path(text_path: str) -> str:
  """The span file beside a plain-format text file: X.txt -> X.spans.jsonl."""
  return os.path.splitext(text_path)[0] + ".spans.jsonl"


def kind_code(tags: np.ndarray, kind: str) -> np.ndarray:
  """Token tags -> that kind's code (OUTSIDE, BEGIN or INSIDE), elementwise."""
  return (tags // SPAN_KINDS[kind]) % 3


def parse_line(raw: str, num_words: int, where: str) -> list[tuple[int, int, str]]:
  """One span-file line -> its spans, checked against its text line's word count."""
  try:
    entry = json.loads(raw)
  except json.JSONDecodeError as error:
    raise SpanFileError(f"{where}: not valid JSON ({error.msg})") from None
  if not isinstance(entry, dict) or not isinstance(entry.get("spans", []), list):
    raise SpanFileError(f"{where}: expected an object {{\"spans\": [[start, end, kind], ...]}}")
  spans = []
  for span in entry.get("spans", []):
    if not (isinstance(span, list) and len(span) == 3 and all(
        isinstance(x, int) and not isinstance(x, bool) for x in span[:2])):
      raise SpanFileError(f"{where}: span {span!r} is not [start, end, kind]")
    start, end, kind = span
    if kind not in SPAN_KINDS:
      raise SpanFileError(f"{where}: span {span!r} has kind {kind!r}, not one of "
                          f"{sorted(SPAN_KINDS)}")
    if not 0 <= start < end <= num_words:
      raise SpanFileError(f"{where}: span {span!r} is not within the line's {num_words} "
                          "words (0 <= start < end <= words)")
    spans.append((start, end, kind))
  for kind in SPAN_KINDS:
    ranges = sorted((s, e) for s, e, k in spans if k == kind)
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
      if start < end:
        raise SpanFileError(f"{where}: {kind} spans overlap at word {start}")
  return spans


def word_tags(spans: list[tuple[int, int, str]], num_words: int) -> np.ndarray:
  """A line's spans -> int8 [words] tags (module docstring)."""
  tags = np.zeros(num_words, np.int8)
  for start, end, kind in spans:
    tags[start] += BEGIN * SPAN_KINDS[kind]
    tags[start + 1:end] += INSIDE * SPAN_KINDS[kind]
  return tags


def piece_tags(tags_of_words: np.ndarray, pieces_per_word: np.ndarray) -> np.ndarray:
  """Word tags [W] and each word's piece count [W] -> int8 [pieces]: a word's tag on its
  first piece, BEGIN turned to INSIDE on the pieces after it."""
  word = np.repeat(np.arange(len(pieces_per_word)), pieces_per_word)  # [pieces]
  tags = tags_of_words[word].astype(np.int8)
  later = np.concatenate([[False], word[1:] == word[:-1]])  # not its word's first piece
  for multiplier in SPAN_KINDS.values():
    tags[later & ((tags // multiplier) % 3 == BEGIN)] += (INSIDE - BEGIN) * multiplier
  return tags


def read_span_file(text_path: str) -> list[list[tuple[int, int, str]]]:
  """The spans of every line of a plain-format text file, from the span file beside it,
  checked line by line against the text (one line each, spans within its words)."""
  path = span_path(text_path)
  if not storage.exists(path) or storage.isdir(path):
    raise SpanFileError(f"{text_path}: no span file beside it ({path}); see "
                        "bert_jax/text/spans.py for the format")
  texts = storage.read_bytes(text_path).decode("utf-8", errors="replace").split("\n")
  if texts and texts[-1] == "":
    texts.pop()  # the final newline ends the last line
  try:
    lines = storage.read_bytes(path).decode("utf-8").split("\n")
  except UnicodeDecodeError as error:
    raise SpanFileError(f"{path}: not valid UTF-8 ({error})") from None
  if lines and lines[-1] == "":
    lines.pop()
  if len(lines) != len(texts):
    raise SpanFileError(f"{path}:{min(len(lines), len(texts)) + 1}: the span file has "
                        f"{len(lines)} lines, its text file {text_path} {len(texts)}; "
                        "one span line per text line, blank lines included")
  spans = []
  for number, (raw, text) in enumerate(zip(lines, texts), 1):
    where = f"{path}:{number}"
    if not raw.strip():
      raise SpanFileError(f"{where}: empty line; a line without spans is {{}}")
    spans.append(parse_line(raw, len(text.split()), where))  # a blank line has 0 words
  return spans


def format_line(spans: list[tuple[int, int, str]]) -> str:
  """A span-file line for the given spans."""
  return json.dumps({"spans": [list(span) for span in spans]} if spans else {})
