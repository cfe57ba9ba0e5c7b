"""Id-for-id parity of our WordPieceTokenizer with Hugging Face's BertTokenizerFast.

Runs both tokenizers over all text in the data root (GLUE text columns, CoNLL-2003
sentences, SQuAD contexts/questions/answers, SWAG, the NLTK corpora zips, WikiText-2),
prints lines compared and mismatches per corpus, and exits non-zero on any mismatch.

  python bench/tokenizer_parity.py                   # everything, uncased
  python bench/tokenizer_parity.py --max_lines 2000  # first 2000 lines per corpus
  python bench/tokenizer_parity.py --cased           # do_lower_case=False on both

The corpus readers here are also used by bench/tokenizer_speed.py and the tests.
"""
import argparse
import csv
import io
import json
import os
import sys
import time
import zipfile
from typing import Callable, Iterator

UNCASED_VOCAB = "bert/uncased_L-12_H-768_A-12/vocab.txt"
# Text-bearing columns of the GLUE TSVs, by header name.
_GLUE_TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "#1 String", "#2 String",
                      "question1", "question2")
_COLA_SENTENCE_COLUMN = 3  # CoLA has no header: source, label, star, sentence.
_SWAG_TEXT_COLUMNS = ("startphrase", "sent1", "sent2", "gold-ending", "ending0",
                      "ending1", "ending2", "ending3", "distractor-0", "distractor-1",
                      "distractor-2", "distractor-3")


def _decode(data: bytes) -> str:
  """UTF-8, or Latin-1 for the few legacy-encoded NLTK files."""
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError:
    return data.decode("latin-1")


def _lines(text: str) -> list[str]:
  """Splits on '\\n' only (str.splitlines would also split on U+2028, U+0085, ...)."""
  return [line.rstrip("\r") for line in text.split("\n")]


def _files_under(root: str, suffix: str) -> list[str]:
  return sorted(os.path.join(folder, name) for folder, _, names in os.walk(root)
                for name in names if name.endswith(suffix))


def glue_texts(data_dir: str) -> Iterator[str]:
  for path in _files_under(os.path.join(data_dir, "glue"), ".tsv"):
    with open(path, encoding="utf-8-sig", newline="") as f:
      rows = [line.split("\t") for line in _lines(f.read()) if line]
    if os.path.basename(os.path.dirname(path)) == "CoLA":
      yield from (row[_COLA_SENTENCE_COLUMN] for row in rows)
      continue
    header, body = rows[0], rows[1:]
    columns = [header.index(name) for name in _GLUE_TEXT_COLUMNS if name in header]
    for row in body:
      yield from (row[column] for column in columns)


def conll_texts(data_dir: str) -> Iterator[str]:
  """One line per sentence: the CoNLL tokens joined by single spaces."""
  for path in _files_under(os.path.join(data_dir, "conll2003"), ".txt"):
    with open(path, encoding="utf-8") as f:
      words = []
      for line in _lines(f.read()) + [""]:
        if line.strip() and not line.startswith("-DOCSTART-"):
          words.append(line.split(" ")[0])
        elif words:
          yield " ".join(words)
          words = []


def squad_texts(data_dir: str) -> Iterator[str]:
  for path in _files_under(os.path.join(data_dir, "squad"), ".json"):
    with open(path, encoding="utf-8") as f:
      articles = json.load(f)["data"]
    for article in articles:
      for paragraph in article["paragraphs"]:
        yield paragraph["context"]
        for qa in paragraph["qas"]:
          yield qa["question"]
          for answer in qa.get("answers", []) + qa.get("plausible_answers", []):
            yield answer["text"]


def _csv_texts(text: str, columns: tuple[str, ...]) -> Iterator[str]:
  reader = csv.DictReader(io.StringIO(text, newline=""))
  for row in reader:
    yield from (row[name] for name in columns if row.get(name))


def swag_texts(data_dir: str) -> Iterator[str]:
  root = os.path.join(data_dir, "swag")
  for path in _files_under(root, ".csv"):
    with open(path, encoding="utf-8", newline="") as f:
      yield from _csv_texts(f.read(), _SWAG_TEXT_COLUMNS)
  for path in _files_under(root, ".zip"):
    with zipfile.ZipFile(path) as archive:
      for name in sorted(n for n in archive.namelist() if n.endswith(".csv")):
        yield from _csv_texts(_decode(archive.read(name)), _SWAG_TEXT_COLUMNS)


def zip_texts(zip_path: str) -> Iterator[str]:
  """Every line of every file in a zipped corpus (NLTK layout)."""
  with zipfile.ZipFile(zip_path) as archive:
    for name in sorted(archive.namelist()):
      if not name.endswith("/"):
        yield from _lines(_decode(archive.read(name)))


def wikitext_texts(data_dir: str) -> Iterator[str]:
  for path in _files_under(os.path.join(data_dir, "wikitext-2"), ".txt"):
    with open(path, encoding="utf-8", newline="") as f:
      yield from _lines(f.read())


def corpus_readers(data_dir: str) -> dict[str, Callable[[], Iterator[str]]]:
  """Name -> a function yielding that corpus's text lines."""
  readers = {
      "glue": lambda: glue_texts(data_dir),
      "conll2003": lambda: conll_texts(data_dir),
      "squad": lambda: squad_texts(data_dir),
      "swag": lambda: swag_texts(data_dir),
      "wikitext-2": lambda: wikitext_texts(data_dir),
  }
  for path in _files_under(os.path.join(data_dir, "nltk_corpora"), ".zip"):
    name = os.path.basename(path)[:-len(".zip")]
    readers[name] = lambda path=path: zip_texts(path)
  return readers


def corpus_lines(data_dir: str, max_lines: int | None = None) -> dict[str, list[str]]:
  """Name -> the first `max_lines` (all if None) text lines of each corpus."""
  result = {}
  for name, read in corpus_readers(data_dir).items():
    lines = []
    for line in read():
      if max_lines is not None and len(lines) >= max_lines:
        break
      lines.append(line)
    result[name] = lines
  return result


def hf_bert_tokenizer(vocab_path: str, lower_case: bool):
  """BertTokenizerFast on a vocab.txt, checked to have actually loaded it.

  transformers 5 silently ignores `vocab_file=` (it builds a 5-token vocab); the file
  has to be passed as `vocab=`.
  """
  from transformers import BertTokenizerFast  # pylint: disable=g-import-not-at-top
  tokenizer = BertTokenizerFast(vocab=vocab_path, do_lower_case=lower_case)
  with open(vocab_path, encoding="utf-8") as f:
    expected_size = sum(1 for _ in f)
  if tokenizer.vocab_size != expected_size:
    raise RuntimeError(f"BertTokenizerFast loaded {tokenizer.vocab_size} tokens from "
                       f"{vocab_path}, expected {expected_size}.")
  return tokenizer


def encode_both(ours, hf, lines: list[str], batch_size: int = 4096):
  """Ids from our tokenizer and from HF (no special tokens), line by line."""
  our_ids, hf_ids = [], []
  for start in range(0, len(lines), batch_size):
    batch = lines[start:start + batch_size]
    our_ids += ours.encode(batch)
    hf_ids += hf(batch, add_special_tokens=False)["input_ids"]
  return our_ids, hf_ids


def describe_diff(hf, line: str, ours: list[int], theirs: list[int]) -> str:
  at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
            min(len(ours), len(theirs)))
  window = slice(max(0, at - 3), at + 4)
  return (f"  line {line[:160]!r}\n"
          f"    first difference at piece {at}: ours {hf.convert_ids_to_tokens(ours[window])}"
          f" vs HF {hf.convert_ids_to_tokens(theirs[window])}")


def main(argv=None) -> int:
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  from bert_jax.text import paths  # pylint: disable=g-import-not-at-top
  from bert_jax.text import wordpiece as tokenizer  # pylint: disable=g-import-not-at-top

  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default=paths.default_data_dir())
  parser.add_argument("--max_lines", type=int, default=None,
                      help="lines per corpus (default: all)")
  parser.add_argument("--cased", action="store_true",
                      help="compare with do_lower_case=False")
  parser.add_argument("--show", type=int, default=5, help="diffs shown per corpus")
  args = parser.parse_args(argv)
  if not args.data_dir or not os.path.isdir(args.data_dir):
    parser.error(f"no data root at {args.data_dir!r}; pass --data_dir")

  vocab_path = os.path.join(args.data_dir, UNCASED_VOCAB)
  ours = tokenizer.WordPieceTokenizer(vocab_path, lower_case=not args.cased)
  hf = hf_bert_tokenizer(vocab_path, lower_case=not args.cased)
  total_lines = total_mismatches = total_pieces = 0
  print(f"{'corpus':<15}{'lines':>10}{'pieces':>12}{'mismatches':>12}{'seconds':>9}")
  for name, lines in corpus_lines(args.data_dir, args.max_lines).items():
    start = time.perf_counter()
    our_ids, hf_ids = encode_both(ours, hf, lines)
    bad = [i for i, (a, b) in enumerate(zip(our_ids, hf_ids)) if a != b]
    pieces = sum(map(len, hf_ids))
    print(f"{name:<15}{len(lines):>10}{pieces:>12}{len(bad):>12}"
          f"{time.perf_counter() - start:>9.1f}")
    for i in bad[:args.show]:
      print(describe_diff(hf, lines[i], our_ids[i], hf_ids[i]))
    total_lines += len(lines)
    total_pieces += pieces
    total_mismatches += len(bad)
  print(f"{'TOTAL':<15}{total_lines:>10}{total_pieces:>12}{total_mismatches:>12}")
  return 1 if total_mismatches else 0


if __name__ == "__main__":
  sys.exit(main())
