"""Penn Treebank dependency sample (NLTK's `dependency_treebank`): a jax-free reader.

  sentences = read_treebank("nltk_corpora/dependency_treebank.zip")  # data-root relative

The zip holds 199 Wall Street Journal files, `dependency_treebank/wsj_NNNN.dp` (a 10%
sample of the Penn Treebank: 3,914 sentences, 94,084 words). A `.dp` file has one word
per line in three tab-separated columns,

  word  POS  head

where POS is the Penn Treebank tag and head the 1-based index of the word's governor in
its sentence (0 for the sentence's root); a blank line ends a sentence. The arcs were
derived from the constituency trees by head rules and carry no relation labels. In this
scheme a preposition governs its object, a modal or auxiliary (or infinitival "to")
governs the verb after it, a complementizer ("that", "because") governs its clause, and a
possessive "'s" governs its possessor and depends on the possessed noun
(bert_jax/probe/relations.py turns these into named relations).

The reader takes the zip (every `.dp` member, in name order) or one `.dp` file. Bad
input raises `TreebankFormatError` with a one-line message "<file>[:<member>]:<line>:
what is wrong": a row without exactly three columns, a head that is not an integer or
points outside its sentence or at the word itself, a sentence without exactly one root
or whose heads form a cycle, a file that is not UTF-8 or holds no sentence.
"""
import dataclasses
import zipfile
from collections.abc import Iterator

from bert_jax.files import storage
from bert_jax.text import paths

DEFAULT_PATH = "nltk_corpora/dependency_treebank.zip"
NUM_COLUMNS = 3  # word, POS tag, head


class TreebankFormatError(ValueError):
  """A treebank row or sentence that is not in the three-column dependency format."""


@dataclasses.dataclass(frozen=True)
class DependencySentence:
  """One sentence; word i (0-based) has tag tags[i] and governor heads[i] (1-based, 0 =
  root), as in the file."""
  words: tuple[str, ...]
  tags: tuple[str, ...]
  heads: tuple[int, ...]
  provenance: str  # "<file>[:<member>]:<line of the first word>"

  def governor(self, i: int) -> int | None:
    """0-based index of word i's governor, None for the root."""
    return self.heads[i] - 1 if self.heads[i] else None


def _check_tree(heads: list[int], where: str) -> None:
  """One root, and every word reaches it (no cycle)."""
  roots = [i for i, h in enumerate(heads) if h == 0]
  if len(roots) != 1:
    raise TreebankFormatError(f"{where}: sentence has {len(roots)} roots (head 0); "
                              "expected exactly one")
  for start in range(len(heads)):
    node, steps = start, 0
    while heads[node] != 0:
      node, steps = heads[node] - 1, steps + 1
      if steps > len(heads):
        raise TreebankFormatError(f"{where}: the heads of word {start + 1} "
                                  f"({heads[start]} ...) form a cycle")


def _parse_row(line: str, where: str) -> tuple[str, str, int]:
  columns = line.split("\t")
  if len(columns) != NUM_COLUMNS:
    raise TreebankFormatError(f"{where}: expected {NUM_COLUMNS} tab-separated columns "
                              f"(word, POS, head), got {len(columns)}: {line!r}")
  word, tag, head = columns
  if not word or not tag:
    raise TreebankFormatError(f"{where}: empty word or POS tag: {line!r}")
  try:
    head_index = int(head)
  except ValueError:
    raise TreebankFormatError(f"{where}: head {head!r} is not an integer") from None
  return word, tag, head_index


def _finish(rows: list[tuple[str, str, int, int]], name: str) -> DependencySentence:
  """rows of (word, tag, head, line number) -> a checked sentence."""
  first = f"{name}:{rows[0][3]}"
  for word_number, (_, _, head, line_number) in enumerate(rows, start=1):
    if not 0 <= head <= len(rows) or head == word_number:
      raise TreebankFormatError(
          f"{name}:{line_number}: head {head} of word {word_number} is outside its "
          f"{len(rows)}-word sentence or the word itself")
  heads = [head for _, _, head, _ in rows]
  _check_tree(heads, f"{first} (sentence starting here)")
  return DependencySentence(words=tuple(r[0] for r in rows), tags=tuple(r[1] for r in rows),
                            heads=tuple(heads), provenance=first)


def parse_text(text: str, name: str) -> list[DependencySentence]:
  """The sentences of one `.dp` file's text; `name` prefixes error messages."""
  sentences, rows = [], []
  for line_number, line in enumerate(text.split("\n"), start=1):
    line = line.rstrip("\r")
    if not line.strip():
      if rows:
        sentences.append(_finish(rows, name))
        rows = []
      continue
    rows.append((*_parse_row(line, f"{name}:{line_number}"), line_number))
  if rows:
    sentences.append(_finish(rows, name))
  if not sentences:
    raise TreebankFormatError(f"{name}: no sentence")
  return sentences


def _decode(data: bytes, name: str) -> str:
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise TreebankFormatError(f"{name}: not valid UTF-8 ({e})") from None


def _files(path: str) -> Iterator[tuple[str, str]]:
  """(name for messages, text) of each `.dp` file in a zip, or of one file."""
  if zipfile.is_zipfile(path):
    with zipfile.ZipFile(path) as archive:
      members = sorted(m for m in archive.namelist() if m.endswith(".dp"))
      if not members:
        raise TreebankFormatError(f"{path}: no .dp member in the zip")
      for member in members:
        name = f"{path}:{member}"
        yield name, _decode(archive.read(member), name)
  else:
    with open(path, "rb") as f:
      yield path, _decode(f.read(), path)


def read_treebank(path: str = DEFAULT_PATH, *, data_dir: str | None = None,
                  ) -> list[DependencySentence]:
  """Every sentence of a dependency zip or `.dp` file (relative to the data root)."""
  resolved = paths.resolve(data_dir, path, urls=True)
  if not storage.exists(resolved) or storage.isdir(resolved):
    raise FileNotFoundError(f"{resolved}: no such treebank file")
  local = storage.local_copy(resolved)  # a URL's object, copied (zipfile reads it)
  return [s for name, text in _files(local) for s in parse_text(text, name)]
