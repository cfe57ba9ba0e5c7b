r"""Turns raw text sources into the plain pretraining format.

The plain format is google-research/bert's: UTF-8 text, one sentence per line, a blank
line between documents. `corpus.py` reads it; this command makes it from the shapes the
data root holds.

  python -m bert_jax.text.prepare --output=workdirs/corpus/pretrain.txt   # all of it
  python -m bert_jax.text.prepare \
      --source=nltk_corpora/gutenberg.zip --source=wikitext-2/valid.txt \
      --output=workdirs/corpus/small.txt

Sources are relative to the data root (`bert_jax.text.paths`) unless absolute; without
--source, all of PRETRAINING_SOURCES. Each source's format is guessed from its file name,
or given as `--source=PATH:FORMAT`:

  format      guessed for         one document is    its sentences are
  zip         *.zip               a member file      paragraphs (blank-line separated,
                                                     lines joined) cut by the sentence rule
  zip_lines   movie_reviews*.zip  a member file      its non-blank lines
  zip_tagged  brown*.zip          a member file      as zip, after `word/tag` -> `word`
  wikitext    *wikitext*          a ` = Title = `    each paragraph line cut by the rule;
                                  article            ` = = Sub = = ` headings dropped,
                                                     `@-@ @,@ @.@` joined, `<unk>` dropped
  plain       anything else       a blank-line       its lines (already the plain format)
                                  separated block

The sentence rule (`split_sentences`; corpus.py's in-graph tfds reader applies the same
patterns): a sentence ends after a run of `.`, `!` or `?` (plus closing quotes/brackets)
followed by whitespace and a character that is not a lowercase ASCII letter, unless the
word before the period is a common title or an initial (`ABBREVIATION`: "Mr. Smith" and
"W. N. Francis" stay whole). Crude, but good enough for NSP pairs.

Every file (and zip member) is read as UTF-8, line by line: a valid line is taken as it
is; a line with invalid bytes is handled by --invalid_utf8: `replace` (default) puts
U+FFFD in place of the bad bytes of that line only, `skip` leaves the line out, `error`
stops at it (file and line number). No file is ever re-read in another encoding. In the
data root, seven State-of-the-Union and inaugural files and two Gutenberg books have
such lines (1 to 45 per file).

Span annotations (`--with_spans`, text/spans.py): every source is a plain-format file with
its span file beside it (`X.txt` -> `X.spans.jsonl`, one JSON line per text line: the
entities and phrases that ERNIE's knowledge masking masks whole); both are checked line by
line and copied, and the output gets its span file beside it, line for line. The corpus
reader reads it with config.data.spans=True.

  python -m bert_jax.text.prepare --with_spans --source=tagged.txt --output=runs/corpus/k.txt

The printed summary counts, per source, documents, sentences, skipped documentation
members (README, CONTENTS, cats.txt), skipped empty documents and, per file, the lines
with invalid UTF-8.
"""
import contextlib
import dataclasses
import os
import re
import zipfile
from collections.abc import Iterator

from absl import app
from absl import flags

from bert_jax import cli
from bert_jax.text import paths
from bert_jax.text import spans as spans_lib

# RE2 (tf.strings.regex_replace) and Python `re` read these patterns and replacements
# the same way. First the space after an abbreviation becomes a \x1f guard, then a line
# break goes in at each sentence boundary, then the guards turn back into spaces.
ABBREVIATION = (r"\b(Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|Messrs|Prof|Gen|Col|Capt|Lt|Sgt|Rev|Gov|"
                r"Sen|Rep|Hon|vs|Vol|No|[A-Z])\.[ \t]+")
ABBREVIATION_REPLACEMENT = "\\1.\x1f"
SENTENCE_BOUNDARY = r"""([.!?]+["')\]]*)[ \t\r\n\f\v]+([^ \t\r\n\f\v a-z])"""
SENTENCE_BOUNDARY_REPLACEMENT = "\\1\n\\2"
ABBREVIATION_GUARD = "\x1f"

_ABBREVIATION_RE = re.compile(ABBREVIATION)
_SENTENCE_BOUNDARY_RE = re.compile(SENTENCE_BOUNDARY)
_WHITESPACE_RE = re.compile(r"\s+")
_BLANK_LINES_RE = re.compile(r"\n[ \t\r\f\v]*\n")
_WIKITEXT_TITLE_RE = re.compile(r"= [^=].* =")      # fullmatch on the stripped line
_WIKITEXT_HEADING_RE = re.compile(r"=( =)+ .* =( =)+")
_DOCUMENTATION_MEMBERS = frozenset({"README", "CONTENTS", "cats.txt"})
FORMATS = ("zip", "zip_lines", "zip_tagged", "wikitext", "plain")
INVALID_UTF8_POLICIES = ("replace", "skip", "error")
_INVALID_UTF8_DONE = {"replace": "bytes replaced", "skip": "lines skipped"}


class PrepareError(ValueError):
  """A source that cannot be converted; the message names the file (and member)."""


@dataclasses.dataclass
class SourceCounts:
  """What one source contributed; printed as one summary line."""
  source: str
  documents: int = 0
  sentences: int = 0
  skipped_members: int = 0
  skipped_empty_documents: int = 0
  invalid_utf8_lines: dict[str, int] = dataclasses.field(default_factory=dict)  # file: count
  invalid_utf8_policy: str = "replace"  # what was done with those lines

  def summary(self) -> str:
    line = (f"{self.source}: {self.documents} documents, {self.sentences} sentences, "
            f"skipped {self.skipped_members} documentation members and "
            f"{self.skipped_empty_documents} empty documents")
    if self.invalid_utf8_lines:
      member = len(self.source) + 1  # "source.zip!member" is shown as "member"
      line += (f"; {sum(self.invalid_utf8_lines.values())} lines with invalid UTF-8 "
               f"({_INVALID_UTF8_DONE[self.invalid_utf8_policy]}) in "
               + ", ".join(f"{where[member:] or where} ({n})"
                           for where, n in self.invalid_utf8_lines.items()))
    return line


def split_sentences(paragraph: str) -> list[str]:
  """One paragraph (any internal line breaks) -> its sentences, whitespace collapsed."""
  text = _WHITESPACE_RE.sub(" ", paragraph).strip()
  if not text:
    return []
  text = _ABBREVIATION_RE.sub(ABBREVIATION_REPLACEMENT, text)
  text = _SENTENCE_BOUNDARY_RE.sub(SENTENCE_BOUNDARY_REPLACEMENT, text)
  text = text.replace(ABBREVIATION_GUARD, " ")
  return [s.strip() for s in text.split("\n") if s.strip()]


def prose_to_sentences(text: str) -> list[str]:
  """A document of wrapped prose: paragraphs at blank lines, each split into sentences."""
  sentences = []
  for paragraph in _BLANK_LINES_RE.split(text.replace("\r\n", "\n")):
    sentences.extend(split_sentences(paragraph))
  return sentences


def lines_to_sentences(text: str) -> list[str]:
  """A document that already has one sentence per line (movie_reviews)."""
  return [_WHITESPACE_RE.sub(" ", line).strip() for line in text.splitlines() if line.strip()]


def strip_pos_tags(text: str) -> str:
  """Brown's `word/tag` tokens -> `word`; its `` and '' quotes -> `"`. Layout is kept."""
  def untag(match: re.Match) -> str:
    word = match.group(0).rsplit("/", 1)[0]
    return '"' if word in ("``", "''") else word
  return re.sub(r"\S+/\S+", untag, text)


def detokenize_wikitext(line: str) -> str:
  """WikiText's split number marks `1 @,@ 000` -> `1,000`; `<unk>` placeholders dropped."""
  line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
  return line.replace("<unk>", " ")


def guess_format(path: str) -> str:
  name = os.path.basename(path).lower()
  if "wikitext" in path.lower():
    return "wikitext"
  if name.endswith(".zip"):
    if name.startswith("movie_reviews"):
      return "zip_lines"
    if name.startswith("brown"):
      return "zip_tagged"
    return "zip"
  return "plain"


def parse_source(spec: str, data_dir: str | None) -> tuple[str, str]:
  """`PATH` or `PATH:FORMAT` -> (resolved path, format)."""
  path, fmt = spec, ""
  head, colon, tail = spec.rpartition(":")
  if colon and tail in FORMATS:
    path, fmt = head, tail
  fmt = fmt or guess_format(path)
  resolved = paths.resolve(data_dir, path)
  if os.path.isdir(resolved):
    raise PrepareError(_directory_message(spec, resolved))
  if not os.path.isfile(resolved):
    fetch = ("" if os.path.isabs(path) else
             " (`python -m bert_jax.download NAME` fetches the data root's files; "
             "`all` fetches every set)")
    raise PrepareError(f"source '{spec}' not found at '{resolved}'{fetch}")
  return resolved, fmt


def _directory_message(spec: str, resolved: str) -> str:
  files = sorted(name for name in os.listdir(resolved)
                 if os.path.isfile(os.path.join(resolved, name)) and not name.startswith("."))
  example = f" (e.g. --source={os.path.join(spec, files[0])})" if files else ""
  return (f"source '{spec}' is a directory ('{resolved}'); give the files in it, "
          f"one --source each{example}")


def _decode(raw: bytes, where: str, policy: str, counts: SourceCounts) -> str:
  """UTF-8 bytes -> text; lines with invalid bytes are handled by `policy` and counted."""
  try:
    return raw.decode("utf-8")  # the usual case: all of it is valid
  except UnicodeDecodeError:
    pass
  lines = []
  for number, line in enumerate(raw.split(b"\n"), 1):  # b"\n" is never inside a character
    try:
      lines.append(line.decode("utf-8"))
    except UnicodeDecodeError as error:
      if policy == "error":
        raise PrepareError(
            f"{where}:{number}: invalid UTF-8 at byte {error.start} of the line") from None
      counts.invalid_utf8_lines[where] = counts.invalid_utf8_lines.get(where, 0) + 1
      if policy == "replace":
        lines.append(line.decode("utf-8", errors="replace"))
  return "\n".join(lines)


def _zip_documents(path: str, fmt: str, policy: str,
                   counts: SourceCounts) -> Iterator[list[str]]:
  to_sentences = lines_to_sentences if fmt == "zip_lines" else prose_to_sentences
  with zipfile.ZipFile(path) as archive:
    for member in sorted(archive.namelist()):
      base = os.path.basename(member)
      if member.endswith("/") or not base or base.startswith("."):
        continue
      if base in _DOCUMENTATION_MEMBERS:
        counts.skipped_members += 1
        continue
      text = _decode(archive.read(member), f"{path}!{member}", policy, counts)
      if fmt == "zip_tagged":
        text = strip_pos_tags(text)
      yield to_sentences(text)


def _wikitext_documents(text: str) -> Iterator[list[str]]:
  document, in_article = [], False
  for line in text.splitlines():
    stripped = line.strip()
    if _WIKITEXT_TITLE_RE.fullmatch(stripped):
      if in_article or document:
        yield document
      document, in_article = [], True
    elif stripped and not _WIKITEXT_HEADING_RE.fullmatch(stripped):
      document.extend(split_sentences(detokenize_wikitext(stripped)))
  if in_article or document:
    yield document


def _plain_documents(text: str) -> Iterator[list[str]]:
  for block in _BLANK_LINES_RE.split(text.replace("\r\n", "\n")):
    yield lines_to_sentences(block)


def read_source(path: str, fmt: str, invalid_utf8: str,
                counts: SourceCounts) -> Iterator[list[str]]:
  """Yields the non-empty documents (lists of sentences) of one source; updates counts."""
  if fmt not in FORMATS:
    raise PrepareError(f"{path}: unknown format '{fmt}'; expected one of {FORMATS}")
  if fmt.startswith("zip"):
    documents = _zip_documents(path, fmt, invalid_utf8, counts)
  else:
    with open(path, "rb") as f:
      text = _decode(f.read(), path, invalid_utf8, counts)
    documents = _wikitext_documents(text) if fmt == "wikitext" else _plain_documents(text)
  for document in documents:
    if document:
      counts.documents += 1
      counts.sentences += len(document)
      yield document
    else:
      counts.skipped_empty_documents += 1


def read_annotated_source(path: str, fmt: str,
                          counts: SourceCounts) -> Iterator[list[tuple[str, list]]]:
  """Yields the documents of a plain source with its span file, as (sentence, spans)
  lists: the text's lines, whitespace collapsed (the words, which spans count, unchanged)."""
  if fmt != "plain":
    raise PrepareError(f"{path}: --with_spans reads plain-format sources (one sentence per "
                       f"line) with a span file beside them, not format '{fmt}'")
  annotations = spans_lib.read_span_file(path)
  with open(path, "rb") as f:
    text = _decode(f.read(), path, "error", counts)
  document = []
  for line, line_spans in zip(text.split("\n"), annotations):
    if line.split():
      document.append((" ".join(line.split()), line_spans))
    elif document:
      yield document
      document = []
  if document:
    yield document


def prepare(sources: list[str], output: str, data_dir: str | None = None,
            invalid_utf8: str = "replace", with_spans: bool = False) -> list[SourceCounts]:
  """Converts `sources` into one plain-format file at `output`; returns per-source counts.
  with_spans: the sources' span files go to the output's (module docstring)."""
  if invalid_utf8 not in INVALID_UTF8_POLICIES:
    raise PrepareError(f"invalid_utf8 must be one of {INVALID_UTF8_POLICIES}")
  if not sources:
    raise PrepareError("no --source given")
  resolved = [parse_source(spec, data_dir) for spec in sources]
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  all_counts = []
  outputs = {output: output + ".tmp"}
  if with_spans:
    outputs[spans_lib.span_path(output)] = spans_lib.span_path(output) + ".tmp"
  with contextlib.ExitStack() as files:
    out, *span_out = (files.enter_context(open(temporary, "w", encoding="utf-8"))
                      for temporary in outputs.values())
    span_out = span_out[0] if span_out else None
    for path, fmt in resolved:
      counts = SourceCounts(path, invalid_utf8_policy=invalid_utf8)
      documents = (_counted(read_annotated_source(path, fmt, counts), counts) if with_spans
                   else ([(sentence, []) for sentence in document]
                         for document in read_source(path, fmt, invalid_utf8, counts)))
      for document in documents:
        out.write("\n".join(sentence for sentence, _ in document) + "\n\n")
        if span_out:
          span_out.write("\n".join(spans_lib.format_line(s) for _, s in document) + "\n{}\n")
      all_counts.append(counts)
  if sum(c.documents for c in all_counts) == 0:
    for temporary in outputs.values():
      os.remove(temporary)
    raise PrepareError(f"no text found in {[path for path, _ in resolved]}")
  for final, temporary in outputs.items():
    os.replace(temporary, final)
  return all_counts


def _counted(documents, counts: SourceCounts):
  for document in documents:
    counts.documents += 1
    counts.sentences += len(document)
    yield document


# All the pretraining text in the data root (shared/data/README.md): the default --source.
PRETRAINING_SOURCES = (
    "nltk_corpora/gutenberg.zip", "nltk_corpora/brown.zip", "nltk_corpora/movie_reviews.zip",
    "nltk_corpora/state_union.zip", "nltk_corpora/inaugural.zip", "wikitext-2/valid.txt",
    "wikitext-2/test.txt")

if __name__ == "__main__":  # flags exist only when run as a program
  _SOURCES = flags.DEFINE_multi_string(
      "source", list(PRETRAINING_SOURCES),
      "Raw source, relative to the data root; `PATH` or `PATH:FORMAT`. Repeat for more. "
      "Default: all the pretraining text of the data root (PRETRAINING_SOURCES).")
  _OUTPUT = flags.DEFINE_string("output", None, "The plain-format file to write.")
  _DATA_DIR = flags.DEFINE_string(
      "data_dir", None, "Data root (default: bert_jax.text.paths.default_data_dir()).")
  _INVALID_UTF8 = flags.DEFINE_enum(
      "invalid_utf8", "replace", INVALID_UTF8_POLICIES,
      "A line with invalid UTF-8 bytes: replace them with U+FFFD, skip the line, or error.")
  _WITH_SPANS = flags.DEFINE_bool(
      "with_spans", False, "Plain sources with span files beside them (bert_jax/text/"
      "spans.py); the output gets its span file, line for line.")


def main(argv):
  del argv
  if not _OUTPUT.value:
    raise app.UsageError("--output is required")
  data_dir = _DATA_DIR.value
  all_counts = prepare(_SOURCES.value, _OUTPUT.value, data_dir, _INVALID_UTF8.value,
                       _WITH_SPANS.value)
  for counts in all_counts:
    print(counts.summary())
  print(f"wrote {sum(c.documents for c in all_counts)} documents, "
        f"{sum(c.sentences for c in all_counts)} sentences to {_OUTPUT.value}")


if __name__ == "__main__":
  cli.run(main)
