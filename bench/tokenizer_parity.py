"""Id-for-id parity of our tokenizers with their references, on every line of the data root.

Runs ours and the reference over all text in the data root (GLUE text columns, CoNLL-2003
sentences, SQuAD contexts/questions/answers, SWAG, the NLTK corpora zips, WikiText-2),
prints lines compared and mismatches per corpus, and exits non-zero on any mismatch.

  python bench/tokenizer_parity.py                   # WordPiece vs BertTokenizerFast, uncased
  python bench/tokenizer_parity.py --max_lines 2000  # first 2000 lines per corpus
  python bench/tokenizer_parity.py --cased           # do_lower_case=False on both
  python bench/tokenizer_parity.py --kind=bpe        # byte-level BPE vs RobertaTokenizerFast
  python bench/tokenizer_parity.py --kind=sentencepiece  # vs sentencepiece and AlbertTokenizerFast

--kind=bpe|sentencepiece use the vocabulary folder --vocab, by default
runs/bench_vocab/<kind>-8k, learned there first (8,192 pieces, `learn_vocab`) from every
non-blank line of the same corpora if it is not there yet. The references load the folder
we saved: `RobertaTokenizerFast.from_pretrained` / `AlbertTokenizerFast.from_pretrained`;
SentencePiece is also compared with the `sentencepiece` library on ALBERT's preprocessing
(`albert_reference_ids`), where the folder keeps accents and leaves case to the model.

The corpus readers here are also used by bench/tokenizer_speed.py and the tests.
"""
import argparse
import csv
import io
import json
import math
import os
import re
import sys
import time
import zipfile
from typing import Callable, Iterator

UNCASED_VOCAB = "bert/uncased_L-12_H-768_A-12/vocab.txt"
BENCH_VOCAB_DIR = "runs/bench_vocab"
BENCH_VOCAB_SIZE = 8192
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


def describe_diff(vocab: list[str], line: str, ours: list[int], theirs: list[int]) -> str:
  at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
            min(len(ours), len(theirs)))
  window = slice(max(0, at - 3), at + 4)
  tokens = lambda ids: [vocab[i] for i in ids[window]]
  return (f"line {line[:160]!r}\n"
          f"    first difference at piece {at}: ours {tokens(ours)} vs {tokens(theirs)}")


def albert_reference_ids(processor, text: str) -> list[int]:
  """The `sentencepiece` library on ALBERT's preprocessing of `text` (accents kept, case
  left to the model): literal <pad> <unk> [CLS] [SEP] [MASK] are their ids, and in the
  text between them "``" and "''" are '"', as google-research/albert and HF do."""
  ids = []
  for index, part in enumerate(re.split(r"(<pad>|<unk>|\[CLS\]|\[SEP\]|\[MASK\])", text)):
    if index % 2:
      ids.append(processor.piece_to_id(part))
    else:
      ids += processor.encode(part.replace("``", '"').replace("''", '"'))
  return ids


def trained_vocab(kind: str, data_dir: str, folder: str) -> str:
  """`folder`, first learned there from every non-blank corpus line if it is missing."""
  from bert_jax.text import learn_vocab  # pylint: disable=g-import-not-at-top
  if os.path.isdir(folder):
    print(f"vocabulary: {folder} (already there)")
    return folder
  text_path = os.path.join(os.path.dirname(folder), "corpus.txt")
  if not os.path.isfile(text_path):
    os.makedirs(os.path.dirname(text_path), exist_ok=True)
    with open(text_path, "w", encoding="utf-8") as f:
      for lines in corpus_lines(data_dir).values():
        f.write("".join(line + "\n" for line in lines if line.strip()))
  start = time.perf_counter()
  size = learn_vocab.learn_and_write(kind, [text_path], folder, BENCH_VOCAB_SIZE)
  print(f"vocabulary: learned {size} {kind} pieces from {text_path} into {folder} "
        f"in {time.perf_counter() - start:.0f} s")
  return folder


def ours_and_hf(kind: str, data_dir: str, vocab: str = "", cased: bool = False) -> tuple:
  """(our tokenizer, HF's reference tokenizer, the vocabulary's path) for `kind`."""
  from bert_jax.text import bpe  # pylint: disable=g-import-not-at-top
  from bert_jax.text import sentencepiece_vocab  # pylint: disable=g-import-not-at-top
  from bert_jax.text import wordpiece  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  if kind == "wordpiece":
    vocab_path = os.path.join(data_dir, UNCASED_VOCAB)
    return (wordpiece.WordPieceTokenizer(vocab_path, lower_case=not cased),
            hf_bert_tokenizer(vocab_path, lower_case=not cased), vocab_path)
  folder = vocab or trained_vocab(kind, data_dir, os.path.join(BENCH_VOCAB_DIR, f"{kind}-8k"))
  if kind == "bpe":
    return (bpe.BPETokenizer.from_pretrained_dir(folder),
            transformers.RobertaTokenizerFast.from_pretrained(folder), folder)
  return (sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(folder),
          transformers.AlbertTokenizerFast.from_pretrained(folder), folder)


def references(ours, hf, vocab: str) -> dict:
  """{reference name: lines -> ids without special tokens} for our tokenizer."""
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  from bert_jax.text import sentencepiece_vocab  # pylint: disable=g-import-not-at-top
  result = {f"HF {type(hf).__name__}": lambda lines: hf(
      lines, add_special_tokens=False)["input_ids"]}
  if (isinstance(ours, sentencepiece_vocab.SentencePieceTokenizer) and ours.keep_accents
      and not ours.do_lower_case):
    processor = spm.SentencePieceProcessor(
        model_file=sentencepiece_vocab.find_model_file(vocab))
    result["sentencepiece"] = lambda lines: [
        albert_reference_ids(processor, line) for line in lines]
  return result


def unigram_score(ours, vocab: str):
  """ids -> the unigram model's total score of that segmentation (SentencePiece only).

  Two different segmentations with the same score are an exact tie of the Viterbi, which
  sentencepiece and HF's Unigram break differently: these are counted apart.
  """
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  from bert_jax.text import sentencepiece_vocab  # pylint: disable=g-import-not-at-top
  if not isinstance(ours, sentencepiece_vocab.SentencePieceTokenizer):
    return None
  processor = spm.SentencePieceProcessor(model_file=sentencepiece_vocab.find_model_file(vocab))
  return lambda ids: sum(processor.get_score(int(i)) for i in ids)


def main(argv=None) -> int:
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  from bert_jax.text import paths  # pylint: disable=g-import-not-at-top

  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default=paths.default_data_dir())
  parser.add_argument("--kind", default="wordpiece",
                      choices=("wordpiece", "bpe", "sentencepiece"))
  parser.add_argument("--vocab", default="",
                      help=f"bpe/sentencepiece folder (default: {BENCH_VOCAB_DIR}/KIND-8k)")
  parser.add_argument("--max_lines", type=int, default=None,
                      help="lines per corpus (default: all)")
  parser.add_argument("--cased", action="store_true",
                      help="wordpiece: compare with do_lower_case=False")
  parser.add_argument("--show", type=int, default=5, help="diffs shown per corpus")
  args = parser.parse_args(argv)
  if not args.data_dir or not os.path.isdir(args.data_dir):
    parser.error(f"no data root at {args.data_dir!r}; pass --data_dir")

  ours, hf, vocab = ours_and_hf(args.kind, args.data_dir, args.vocab, args.cased)
  refs = references(ours, hf, vocab)
  print(f"{args.kind} ({vocab}): {ours.vocab_size} pieces; references: {', '.join(refs)}")
  names = list(refs)
  score = unigram_score(ours, vocab)
  width = max(len(name) for name in names) + 5 + (8 if score else 0)
  header = "".join(f"{'vs ' + name:>{width}}" for name in names)
  print(f"{'corpus':<15}{'lines':>10}{'pieces':>12}{header}{'seconds':>9}")
  totals = {"lines": 0, "pieces": 0, **{name: [0, 0] for name in names}}
  cell = lambda bad, ties: f"{bad} ({ties} ties)" if score else str(bad)
  for corpus, lines in corpus_lines(args.data_dir, args.max_lines).items():
    start = time.perf_counter()
    mine = []
    for i in range(0, len(lines), 4096):
      mine += ours.encode(lines[i:i + 4096])
    counts = ""
    for name, reference in refs.items():
      theirs = reference(lines)
      bad = [i for i, (a, b) in enumerate(zip(mine, theirs)) if list(a) != list(b)]
      ties = [i for i in bad if score and math.isclose(
          score(mine[i]), score(theirs[i]), rel_tol=1e-9, abs_tol=1e-9)]
      for i in bad[:args.show]:
        tie = " (an exact score tie)" if i in ties else ""
        print(f"  vs {name}{tie}: " + describe_diff(ours.vocab, lines[i], mine[i], theirs[i]))
      totals[name][0] += len(bad)
      totals[name][1] += len(ties)
      counts += f"{cell(len(bad), len(ties)):>{width}}"
    pieces = sum(map(len, mine))
    print(f"{corpus:<15}{len(lines):>10}{pieces:>12}{counts}"
          f"{time.perf_counter() - start:>9.1f}")
    totals["lines"] += len(lines)
    totals["pieces"] += pieces
  counts = "".join(f"{cell(*totals[name]):>{width}}" for name in names)
  print(f"{'TOTAL':<15}{totals['lines']:>10}{totals['pieces']:>12}{counts}")
  return 1 if any(totals[name][0] > totals[name][1] for name in names) else 0


if __name__ == "__main__":
  sys.exit(main())
