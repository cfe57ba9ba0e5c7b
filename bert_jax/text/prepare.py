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
  tfds        tfds:NAME[:SPLIT]   an example's       each line cut by the rule (what
              (split: train)      `text`             corpus.py's in-graph reader does)

A tfds source (e.g. `--source=tfds:wikipedia/20230601.en`) is read from tfds's data dir
(TFDS_DATA_DIR, else ~/tensorflow_datasets), already prepared there: nothing is downloaded.

The sentence rule (bert_jax/text/sentences.py; corpus.py's in-graph tfds reader applies the
same patterns): a sentence ends after a run of `.`, `!` or `?` (plus closing quotes/brackets)
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

Pod scale (`--num_shards=N --shard_index=I`, `--workers=K`): every run is given the same
--source list; the raw documents of all sources (zip members, WikiText articles, plain
blocks, tfds examples, before empty ones are dropped) are numbered 0, 1, ... in source
order, and shard I keeps those numbered I modulo N, in that order, in X-0000I-of-0000N.txt
for --output=X.txt (the glob X-*-of-0000N.txt is the whole set for
config.data.train_files). The N files hold each document of the 1-shard output once. A
zip member another shard keeps is not even read; whole files (and tfds examples) are read
by every shard, and shard 0 alone counts what all of them see (documentation members,
invalid UTF-8 lines of whole files), so the shards' counts add up to a 1-shard run's. K
worker processes (spawned: fresh interpreters that import this module and the calling
program's main module, here neither JAX nor TensorFlow) clean and split documents in tasks
of about a MiB of text while this process reads, decodes and writes in order: the output
is the same bytes for any K.

  python -m bert_jax.text.prepare --source=wiki.txt --output=runs/corpus/wiki.txt \
      --num_shards=16 --shard_index=3 --workers=8      # -> runs/corpus/wiki-00003-of-00016.txt

The printed summary counts, per source, documents, sentences, skipped documentation
members (README, CONTENTS, cats.txt), skipped empty documents and, per file, the lines
with invalid UTF-8.
"""
import collections
import contextlib
import dataclasses
import multiprocessing
import os
import re
import zipfile
from collections.abc import Iterator

from absl import app
from absl import flags

from bert_jax.files import storage
from bert_jax.startup import cli
from bert_jax.text import paths
from bert_jax.text import spans as spans_lib
from bert_jax.text.sentences import BLANK_LINES_RE, clean_documents

_WIKITEXT_TITLE_RE = re.compile(r"= [^=].* =")      # fullmatch on the stripped line
_DOCUMENTATION_MEMBERS = frozenset({"README", "CONTENTS", "cats.txt"})
FORMATS = ("zip", "zip_lines", "zip_tagged", "wikitext", "plain")
TFDS_PREFIX = "tfds:"
TFDS_TEXT_FIELD = "text"  # wikipedia's and bookcorpus's document field
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
  """`PATH`, `PATH:FORMAT` or `tfds:NAME[:SPLIT]` -> (resolved path, format)."""
  if spec.startswith(TFDS_PREFIX):
    name, _, split = spec[len(TFDS_PREFIX):].partition(":")
    if not name:
      raise PrepareError(f"source '{spec}' names no tfds dataset; e.g. "
                         f"{TFDS_PREFIX}wikipedia/20230601.en:train")
    return f"{TFDS_PREFIX}{name}:{split or 'train'}", "tfds"
  path, fmt = spec, ""
  head, colon, tail = spec.rpartition(":")
  if colon and tail in FORMATS:
    path, fmt = head, tail
  fmt = fmt or guess_format(path)
  resolved = paths.resolve(data_dir, path, urls=True)
  if storage.isdir(resolved):
    raise PrepareError(_directory_message(spec, resolved))
  if not storage.exists(resolved):
    fetch = ("" if os.path.isabs(path) else
             " (`python -m bert_jax.commands.download NAME` fetches the data root's files; "
             "`all` fetches every set)")
    raise PrepareError(f"source '{spec}' not found at '{resolved}'{fetch}")
  return resolved, fmt


def _directory_message(spec: str, resolved: str) -> str:
  files = [name for name in storage.listdir(resolved)
           if not storage.isdir(storage.join(resolved, name)) and not name.startswith(".")]
  example = f" (e.g. --source={storage.join(spec, files[0])})" if files else ""
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


def _zip_documents(path: str, policy: str, counts: SourceCounts,
                   shard: "Shard") -> Iterator[tuple[str, bool]]:
  """The raw text of each member this shard keeps; only those are read and decoded."""
  with storage.open_file(path, "rb") as f, zipfile.ZipFile(f) as archive:
    for member in sorted(archive.namelist()):
      base = os.path.basename(member)
      if member.endswith("/") or not base or base.startswith("."):
        continue
      if base in _DOCUMENTATION_MEMBERS:
        counts.skipped_members += shard.reports_whole_sources
        continue
      if shard.keeps_next():
        yield _decode(archive.read(member), f"{path}!{member}", policy, counts), True


def _wikitext_documents(text: str, shard: "Shard") -> Iterator[tuple[str, bool]]:
  """Each article's non-title lines, stripped, joined by newlines. Lines before the first
  title are a document too when they make sentences (not counted as empty when not)."""
  lines, in_article = [], False
  for line in text.splitlines():
    stripped = line.strip()
    if _WIKITEXT_TITLE_RE.fullmatch(stripped):
      if (in_article or lines) and shard.keeps_next():
        yield "\n".join(lines), in_article
      lines, in_article = [], True
    elif stripped:
      lines.append(stripped)
  if (in_article or lines) and shard.keeps_next():
    yield "\n".join(lines), in_article


def _plain_documents(text: str, shard: "Shard") -> Iterator[tuple[str, bool]]:
  for block in BLANK_LINES_RE.split(text.replace("\r\n", "\n")):
    if shard.keeps_next():
      yield block, True


def _tfds_documents(source: str, policy: str, counts: SourceCounts,
                    shard: "Shard") -> Iterator[tuple[str, bool]]:
  """Each example's text of `tfds:NAME:SPLIT`, in the dataset's order; every shard reads
  them all and decodes only its own."""
  import tensorflow_datasets as tfds  # Only this format needs it.
  name, split = source[len(TFDS_PREFIX):].rsplit(":", 1)
  try:
    examples = tfds.load(name, split=split, shuffle_files=False, download=False)
  except Exception as error:  # pylint: disable=broad-except  # tfds's many kinds, one line
    message = str(error).strip().split("\n")[0]
    raise PrepareError(f"{source}: tfds cannot read it ({type(error).__name__}: "
                       f"{message})") from None
  if TFDS_TEXT_FIELD not in examples.element_spec:
    raise PrepareError(f"{source}: its examples have no '{TFDS_TEXT_FIELD}' field; they "
                       f"have {sorted(examples.element_spec)}")
  for number, example in enumerate(tfds.as_numpy(examples.map(
      lambda example: example[TFDS_TEXT_FIELD]))):
    if shard.keeps_next():
      yield _decode(example, f"{source}#{number}", policy, counts), True


def raw_documents(path: str, fmt: str, invalid_utf8: str, counts: SourceCounts,
                  shard: "Shard") -> Iterator[tuple[str, bool]]:
  """(raw text, empty counts) for each document of one source that `shard` keeps, in
  order; `empty counts`: whether an empty result is a skipped empty document."""
  if fmt == "tfds":
    return _tfds_documents(path, invalid_utf8, counts, shard)
  if fmt not in FORMATS:
    raise PrepareError(f"{path}: unknown format '{fmt}'; expected one of {FORMATS}")
  if fmt.startswith("zip"):
    return _zip_documents(path, invalid_utf8, counts, shard)
  with storage.open_file(path, "rb") as f:  # every shard reads it all; the first counts
    text = _decode(f.read(), path, invalid_utf8,
                   counts if shard.reports_whole_sources else SourceCounts(path))
  split = _wikitext_documents if fmt == "wikitext" else _plain_documents
  return split(text, shard)


def _count(document: list[str], empty_counts: bool, counts: SourceCounts) -> bool:
  """Counts a cleaned document (or an empty one); whether it goes to the output."""
  if document:
    counts.documents += 1
    counts.sentences += len(document)
  elif empty_counts:
    counts.skipped_empty_documents += 1
  return bool(document)


def read_annotated_source(path: str, fmt: str,
                          counts: SourceCounts) -> Iterator[list[tuple[str, list]]]:
  """Yields the documents of a plain source with its span file, as (sentence, spans)
  lists: the text's lines, whitespace collapsed (the words, which spans count, unchanged)."""
  if fmt != "plain":
    raise PrepareError(f"{path}: --with_spans reads plain-format sources (one sentence per "
                       f"line) with a span file beside them, not format '{fmt}'")
  annotations = spans_lib.read_span_file(path)
  text = _decode(storage.read_bytes(path), path, "error", counts)
  document = []
  for line, line_spans in zip(text.split("\n"), annotations):
    if line.split():
      document.append((" ".join(line.split()), line_spans))
    elif document:
      yield document
      document = []
  if document:
    yield document


@dataclasses.dataclass
class Shard:
  """Which raw documents one run keeps: those numbered `index` modulo `count` (module
  docstring). `keeps_next()` numbers the next raw document and says whether it is kept."""
  count: int = 1
  index: int = 0
  _next: int = 0

  @property
  def reports_whole_sources(self) -> bool:
    """Shard 0 alone counts what every shard sees (documentation members, the invalid
    UTF-8 lines of whole-file sources), so that the shards' counts add up."""
    return self.index == 0

  def keeps_next(self) -> bool:
    number, self._next = self._next, self._next + 1
    return number % self.count == self.index

  def path(self, output: str) -> str:
    """The file this shard writes: `output` itself for one shard, else the shard's number
    before the extension, X.txt -> X-00003-of-00016.txt (the glob X-*-of-00016.txt reads
    the set; each shard's span file, X-00003-of-00016.spans.jsonl, is its own)."""
    if self.count == 1:
      return output
    root, extension = os.path.splitext(output)
    return f"{root}-{self.index:05d}-of-{self.count:05d}{extension}"


_CHUNK_CHARS = 1 << 20  # raw text per worker task: big enough to hide the hand-over


def _chunks(resolved, invalid_utf8: str, shard: Shard, all_counts: list):
  """(counts, empty-counts flags, format, raw texts) tasks over all sources, in order."""
  for path, fmt in resolved:
    counts = SourceCounts(path, invalid_utf8_policy=invalid_utf8)
    all_counts.append(counts)
    texts, flags, size = [], [], 0
    for text, empty_counts in raw_documents(path, fmt, invalid_utf8, counts, shard):
      texts.append(text)
      flags.append(empty_counts)
      size += len(text)
      if size >= _CHUNK_CHARS:
        yield counts, flags, fmt, texts
        texts, flags, size = [], [], 0
    if texts:
      yield counts, flags, fmt, texts


def _cleaned(chunks, workers: int):
  """Each task with its texts' sentences, in task order: inline for one worker, else on
  `workers` spawned processes (fresh interpreters: no TensorFlow or JAX state of this
  one is inherited; they run only CLEANERS), a bounded number of tasks ahead."""
  if workers == 1:
    for counts, flags, fmt, texts in chunks:
      yield counts, flags, clean_documents(fmt, texts)
    return
  with multiprocessing.get_context("spawn").Pool(workers) as pool:
    pending = collections.deque()
    for counts, flags, fmt, texts in chunks:
      pending.append((counts, flags, pool.apply_async(clean_documents, (fmt, texts))))
      if len(pending) >= 2 * workers:
        counts, flags, result = pending.popleft()
        yield counts, flags, result.get()
    while pending:
      counts, flags, result = pending.popleft()
      yield counts, flags, result.get()


def _raw_sources_documents(resolved, invalid_utf8: str, shard: Shard, workers: int,
                           all_counts: list) -> Iterator[list[tuple[str, list]]]:
  for counts, flags, documents in _cleaned(
      _chunks(resolved, invalid_utf8, shard, all_counts), workers):
    for empty_counts, document in zip(flags, documents):
      if _count(document, empty_counts, counts):
        yield [(sentence, []) for sentence in document]


def _annotated_sources_documents(resolved, shard: Shard,
                                 all_counts: list) -> Iterator[list[tuple[str, list]]]:
  for path, fmt in resolved:
    counts = SourceCounts(path)
    all_counts.append(counts)
    for document in read_annotated_source(path, fmt, counts):
      if shard.keeps_next():
        _count(document, True, counts)
        yield document


def _check_options(invalid_utf8: str, num_shards: int, shard_index: int, workers: int):
  if invalid_utf8 not in INVALID_UTF8_POLICIES:
    raise PrepareError(f"invalid_utf8 must be one of {INVALID_UTF8_POLICIES}")
  if num_shards < 1:
    raise PrepareError(f"num_shards must be at least 1, not {num_shards}")
  if not 0 <= shard_index < num_shards:
    raise PrepareError(f"shard_index must be in 0..{num_shards - 1} for num_shards="
                       f"{num_shards}, not {shard_index}")
  if workers < 1:
    raise PrepareError(f"workers must be at least 1, not {workers}")


def prepare(sources: list[str], output: str, data_dir: str | None = None,
            invalid_utf8: str = "replace", with_spans: bool = False, num_shards: int = 1,
            shard_index: int = 0, workers: int = 1) -> list[SourceCounts]:
  """Converts `sources` into one plain-format file, `Shard(num_shards, shard_index).path(
  output)`; returns per-source counts. with_spans: the sources' span files go to the
  output's (module docstring). workers: processes that clean documents (same bytes)."""
  _check_options(invalid_utf8, num_shards, shard_index, workers)
  if not sources:
    raise PrepareError("no --source given")
  resolved = [parse_source(spec, data_dir) for spec in sources]
  shard = Shard(num_shards, shard_index)
  output = shard.path(storage.absolute(output))
  storage.makedirs(storage.parent(output))
  all_counts = []
  outputs = {output: output + ".tmp"}
  if with_spans:
    outputs[spans_lib.span_path(output)] = spans_lib.span_path(output) + ".tmp"
  with contextlib.ExitStack() as files:
    out, *span_out = (files.enter_context(storage.open_file(temporary, "w"))
                      for temporary in outputs.values())
    span_out = span_out[0] if span_out else None
    documents = (_annotated_sources_documents(resolved, shard, all_counts) if with_spans
                 else _raw_sources_documents(resolved, invalid_utf8, shard, workers,
                                             all_counts))
    for document in documents:
      out.write("\n".join(sentence for sentence, _ in document) + "\n\n")
      if span_out:
        span_out.write("\n".join(spans_lib.format_line(s) for _, s in document) + "\n{}\n")
  if sum(c.documents for c in all_counts) == 0:
    for temporary in outputs.values():
      storage.remove(temporary)
    where = f" for shard {shard_index} of {num_shards}" if num_shards > 1 else ""
    raise PrepareError(f"no text found in {[path for path, _ in resolved]}{where}")
  for final, temporary in outputs.items():
    storage.move(temporary, final)  # on object storage: copied, then deleted
  return all_counts


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
  _NUM_SHARDS = flags.DEFINE_integer(
      "num_shards", 1, "Split the raw documents into this many shards (one per host or "
      "process, each with the same --source list); >1 writes X-IIIII-of-NNNNN.txt for "
      "--output=X.txt.")
  _SHARD_INDEX = flags.DEFINE_integer(
      "shard_index", 0, "The shard this run writes: raw documents numbered "
      "shard_index modulo num_shards, across all sources in order.")
  _WORKERS = flags.DEFINE_integer(
      "workers", 1, "Processes that clean and split documents; the output is the same "
      "bytes for any number.")


def main(argv):
  del argv
  if not _OUTPUT.value:
    raise app.UsageError("--output is required")
  data_dir = _DATA_DIR.value
  all_counts = prepare(_SOURCES.value, _OUTPUT.value, data_dir, _INVALID_UTF8.value,
                       _WITH_SPANS.value, _NUM_SHARDS.value, _SHARD_INDEX.value,
                       _WORKERS.value)
  for counts in all_counts:
    print(counts.summary())
  output = Shard(_NUM_SHARDS.value, _SHARD_INDEX.value).path(_OUTPUT.value)
  print(f"wrote {sum(c.documents for c in all_counts)} documents, "
        f"{sum(c.sentences for c in all_counts)} sentences to {output}")


if __name__ == "__main__":
  cli.run(main, urls=("source", "output", "data_dir"))
