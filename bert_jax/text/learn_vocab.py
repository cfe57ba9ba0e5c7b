r"""Learns a vocabulary from plain-format text, for pretraining from scratch: one way per kind.

  python -m bert_jax.text.learn_vocab --input=runs/corpus/pretrain.txt \
      --vocab_size=8192 --output=runs/corpus/vocab-8k.txt                  # WordPiece (BERT)
  python -m bert_jax.text.learn_vocab --kind=bpe --input=runs/corpus/pretrain.txt \
      --vocab_size=8192 --output=runs/corpus/bpe-8k                        # RoBERTa: a folder
  python -m bert_jax.text.learn_vocab --kind=sentencepiece --input=runs/corpus/pretrain.txt \
      --vocab_size=8192 --output=runs/corpus/spm-8k                        # ALBERT: a folder

wordpiece (the default): BERT's released vocabularies fit Wikipedia + BookCorpus; a new
corpus (or a small model that should not spend most of its parameters and output softmax
on 30,522 rows) gets its own. Words are cut exactly as `WordPieceTokenizer` cuts them
(same normalisation, lower-casing, punctuation and CJK splitting), counted, and handed to
tensorflow_text's WordPiece learner (the algorithm of `bert_vocab_from_dataset`). The file
starts with [PAD] [UNK] [CLS] [SEP] [MASK]; the tokenizer finds them by name, so any
vocab.txt in this layout loads in `WordPieceTokenizer` and in HF's BertTokenizer alike.
bpe: `bpe.train_bpe` (HF tokenizers' byte-level BPE trainer), a folder that
`BPETokenizer` and HF's RobertaTokenizerFast load; byte-level BPE keeps case.
sentencepiece: `sentencepiece_vocab.train_sentencepiece` (a unigram model that folds case
itself unless --nolower_case), saved as spiece.model + tokenizer_config.json, a folder that
`SentencePieceTokenizer` and HF's AlbertTokenizerFast load.
Each output is a valid config.data.vocab_path (text/tokenizers.py picks the kind).
"""
from __future__ import annotations

import collections
import os
from collections.abc import Sequence

from bert_jax.files import storage
from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.text import bpe
from bert_jax.text import sentencepiece_vocab
from bert_jax.text import subword
from bert_jax.text import wordpiece as tokenizer_lib

_LINES_PER_BATCH = 4096


def count_words(input_files: Sequence[str], lower_case: bool = True) -> collections.Counter:
  """{word: count} over the non-blank lines of the files, split as the tokenizer splits."""
  missing = [path for path in input_files if not os.path.isfile(path)]
  if missing:
    raise FileNotFoundError(f"vocab learner input file(s) not found: {missing}")
  lines = tf.data.TextLineDataset(list(input_files)).filter(
      tf.autograph.experimental.do_not_convert(
          lambda line: tf.strings.length(tf.strings.strip(line)) > 0))
  words = lines.batch(_LINES_PER_BATCH).map(tf.autograph.experimental.do_not_convert(
      lambda batch: tokenizer_lib.normalize_and_split(batch, lower_case).flat_values))
  counts = collections.Counter()
  for batch in words.as_numpy_iterator():
    counts.update(batch)
  if not counts:
    raise ValueError(f"vocab learner: no words in {list(input_files)}")
  # The splitter turns special tokens written in the text into sentinel words; they
  # are not words to learn pieces from.
  sentinels = {chr(tokenizer_lib.SENTINEL_BASE + i)
               for i in range(len(subword.SPECIAL_TOKENS))}
  return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()
                              if w.decode("utf-8") not in sentinels})


def learn_vocab(input_files: Sequence[str], vocab_size: int, lower_case: bool = True,
                min_count: int = 10) -> list[str]:
  """A WordPiece vocabulary (special tokens first) of at most `vocab_size` entries.

  Args:
    input_files: plain-format text files.
    vocab_size: the target size, special tokens included; the learner's binary search
      lands within a few percent below it.
    lower_case: fold case (and strip accents) as an uncased tokenizer does.
    min_count: words seen fewer times only contribute their characters.
  """
  reserved = list(subword.SPECIAL_TOKENS)
  if vocab_size <= len(reserved):
    raise ValueError(f"vocab_size {vocab_size} leaves no room beside {reserved}")
  counts = count_words(input_files, lower_case)
  from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib
  vocab = wordpiece_tokenizer_learner_lib.learn(
      sorted(counts.items()), vocab_size=vocab_size, reserved_tokens=reserved,
      lower_thresh=min_count)
  return vocab[:vocab_size]


def write_vocab(vocab: Sequence[str], path: str) -> None:
  """One token per line, as vocab.txt files are (a local file or a URL's object)."""
  if storage.parent(path):
    storage.makedirs(storage.parent(path))
  storage.write_text(path, "".join(token + "\n" for token in vocab))


def _learn_wordpiece(input_files, output, vocab_size, lower_case, min_count) -> int:
  vocab = learn_vocab(input_files, vocab_size, lower_case, min_count)
  write_vocab(vocab, output)
  return len(vocab)


def _learn_bpe(input_files, output, vocab_size, lower_case, min_count) -> int:
  del min_count  # The BPE trainer's own min_frequency (2) applies.
  if lower_case:
    raise ValueError("byte-level BPE keeps case: drop --lower_case for --kind=bpe")
  return storage.write_folder(  # a bucket's folder: trained locally, then copied
      output, lambda local: bpe.train_bpe(input_files, local, vocab_size).vocab_size)


def _learn_sentencepiece(input_files, output, vocab_size, lower_case, min_count) -> int:
  del min_count

  def learn(local: str) -> int:
    model = sentencepiece_vocab.train_sentencepiece(
        input_files, os.path.join(local, "spiece"), vocab_size, lower_case=lower_case)
    tokenizer = sentencepiece_vocab.SentencePieceTokenizer(model)
    tokenizer.save(local)
    return tokenizer.vocab_size
  return storage.write_folder(output, learn)  # a bucket's folder: learnt locally, copied


# Kind -> learner(input_files, output, vocab_size, lower_case, min_count) -> size written.
LEARNERS = {"wordpiece": _learn_wordpiece, "bpe": _learn_bpe,
            "sentencepiece": _learn_sentencepiece}


def learn_and_write(kind: str, input_files: Sequence[str], output: str, vocab_size: int,
                    lower_case: bool | None = None, min_count: int = 10) -> int:
  """Learns a `kind` vocabulary and writes it to `output`; returns its size.

  Args:
    kind: a name in LEARNERS.
    input_files: plain-format text files (URLs: copied to local files first, for the
      learners' readers).
    output: the vocab.txt file (wordpiece) or the folder (bpe, sentencepiece) to write,
      local or a URL.
    vocab_size: the target size, special tokens included.
    lower_case: None = True for wordpiece and sentencepiece, False for bpe.
    min_count: wordpiece only: words seen fewer times only contribute their characters.
  """
  if kind not in LEARNERS:
    raise ValueError(f"unknown vocabulary kind {kind!r}; expected one of {sorted(LEARNERS)}")
  if lower_case is None:
    lower_case = kind != "bpe"
  files = [storage.local_copy(path) if storage.exists(path) else path for path in input_files]
  return LEARNERS[kind](files, output, vocab_size, lower_case, min_count)


if __name__ == "__main__":
  from absl import flags

  from bert_jax.startup import cli

  _KIND = flags.DEFINE_enum("kind", "wordpiece", list(LEARNERS), "The vocabulary to learn.")
  _INPUT = flags.DEFINE_multi_string("input", None, "Plain-format text file(s).")
  _OUTPUT = flags.DEFINE_string(
      "output", None, "The vocab.txt (wordpiece) or the folder (bpe, sentencepiece).")
  _VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 8192, "Target size, specials included.")
  _LOWER_CASE = flags.DEFINE_bool(
      "lower_case", None, "Uncased vocabulary; default: yes, except for bpe (keeps case).")
  _MIN_COUNT = flags.DEFINE_integer(
      "min_count", 10, "wordpiece: rarer words add only characters.")
  flags.mark_flags_as_required(["input", "output"])

  def main(argv):
    del argv
    size = learn_and_write(_KIND.value, _INPUT.value, _OUTPUT.value, _VOCAB_SIZE.value,
                           _LOWER_CASE.value, _MIN_COUNT.value)
    print(f"wrote a {_KIND.value} vocabulary of {size} tokens to {_OUTPUT.value}")

  cli.run(main, urls=("input", "output"))
