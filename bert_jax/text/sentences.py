"""Raw document text -> sentences: the sentence rule and each source format's cleaning.

`split_sentences` cuts a paragraph at sentence boundaries unless the word before the
period is a common title or an initial; bert_jax/text/corpus.py applies the same two
regexes in-graph (RE2) to tfds documents. `CLEANERS` maps a source format to its cleaning,
which `prepare --workers` runs in worker processes: this module imports nothing heavy.
"""
import re

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
BLANK_LINES_RE = re.compile(r"\n[ \t\r\f\v]*\n")
_WIKITEXT_HEADING_RE = re.compile(r"=( =)+ .* =( =)+")


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
  for paragraph in BLANK_LINES_RE.split(text.replace("\r\n", "\n")):
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


def _tfds_sentences(text: str) -> list[str]:
  """Every line a paragraph, cut by the sentence rule."""
  return [sentence for line in text.split("\n") for sentence in split_sentences(line)]


def _wikitext_sentences(article: str) -> list[str]:
  """An article's stripped lines -> sentences: headings dropped, the rest detokenized."""
  sentences = []
  for line in article.split("\n"):
    if line and not _WIKITEXT_HEADING_RE.fullmatch(line):
      sentences.extend(split_sentences(detokenize_wikitext(line)))
  return sentences


def _tagged_prose_to_sentences(text: str) -> list[str]:
  return prose_to_sentences(strip_pos_tags(text))


# Format -> raw document text -> its sentences: the cleaning that --workers runs in parallel.
CLEANERS = {
    "zip": prose_to_sentences,
    "zip_lines": lines_to_sentences,
    "zip_tagged": _tagged_prose_to_sentences,
    "wikitext": _wikitext_sentences,
    "plain": lines_to_sentences,
    "tfds": _tfds_sentences,
}


def clean_documents(fmt: str, texts: list[str]) -> list[list[str]]:
  """Raw document texts of one format -> their sentences (a worker's task)."""
  return [CLEANERS[fmt](text) for text in texts]

