"""CoNLL-2003 NER: reader, first-sub-token featuriser, and word-level scoring.

API (the same shape as glue.py, squad.py and swag.py):
  LABELS                              the 9 IOB2 tags; a tag's id is its index
  read_examples(source, split="train", *, data_dir=None) -> list[Sentence]
      source: a file in the CoNLL-2003 format ("conll2003/valid.txt") or
      "tfds:conll2003" (tfds splits train/dev/test).
  featurize(sentences, tokenizer, max_seq_length) -> dict of numpy arrays:
      input_ids, token_type_ids, attention_mask  int32 [N, T]
      labels         int32 [N, T]   tag id at each word's first sub-token, 0 elsewhere
      label_weights  float32 [N, T] 1 at first sub-tokens, 0 elsewhere (loss mask)
      word_index     int32 [N, T]   word position at first sub-tokens, -1 elsewhere
      example_index  int32 [N]
  load_split(config_like, split, tokenizer, max_seq_length) -> (features, metadata)
      config_like: dict/ConfigDict with optional `data_dir` and `sources`
      ({split: source}, default DEFAULT_FILES); metadata is a TaggingMetadata.
  word_tags(predicted_ids, word_index, sentences) -> (tags per word, cut word count)
  score(logits, metadata) -> {precision, recall, f1, per_type, cut_words}

One sentence is one sequence: [CLS] pieces [SEP], cut at max_seq_length, each word's
pieces those it has inside running text (`tokenizer.encode_words`: byte-level BPE's
`Ġword`, as HF RoBERTa encodes split words with add_prefix_space). Words that
do not fit are predicted "O" at scoring time and counted in `cut_words`; the scores
are still over every gold entity. A word the tokenizer maps to no piece (e.g. only
control characters) is fed as [UNK], so every word keeps a first sub-token.
"""
import dataclasses
from collections.abc import Sequence

import numpy as np

from bert_jax.finetune import metrics
from bert_jax.finetune import sources as task_sources
from bert_jax.finetune.sources import DataFormatError

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
          "I-MISC")
LABEL_IDS = {tag: i for i, tag in enumerate(LABELS)}
DEFAULT_FILES = {"train": "conll2003/train.txt", "dev": "conll2003/valid.txt",
                 "test": "conll2003/test.txt"}
DOCSTART = "-DOCSTART-"
NUM_COLUMNS = 4  # token POS chunk NER


@dataclasses.dataclass(frozen=True)
class Sentence:
  words: tuple[str, ...]
  tags: tuple[str, ...]   # NER tags, one per word, from LABELS.
  provenance: str         # "<path>:<first line>" or "tfds:conll2003:<split>[<i>]".


@dataclasses.dataclass(frozen=True)
class TaggingMetadata:
  """What `score` needs besides the logits."""
  sentences: list[Sentence]
  word_index: np.ndarray  # int32 [N, T], as in the features.


# ------------------------------------------------------------------------------------
# Reading.
# ------------------------------------------------------------------------------------
def read_file(path: str) -> list[Sentence]:
  """Sentences of a space-separated `token POS chunk NER` file.

  Blank lines end a sentence and -DOCSTART- lines (document breaks) are dropped.
  """
  sentences, words, tags, first_line = [], [], [], 0

  def flush():
    if words:
      sentences.append(Sentence(tuple(words), tuple(tags), f"{path}:{first_line}"))
      words.clear()
      tags.clear()

  for line_number, text in task_sources.read_lines(path):
    fields = text.split()
    if not fields or fields[0] == DOCSTART:
      flush()
      continue
    where = f"{path}:{line_number}"
    if len(fields) != NUM_COLUMNS:
      raise DataFormatError(f"{where}: expected {NUM_COLUMNS} space-separated columns "
                            f"(token POS chunk NER), found {len(fields)}.")
    if fields[3] not in LABEL_IDS:
      raise DataFormatError(f"{where}: NER tag {fields[3]!r} is not one of "
                            f"{list(LABELS)}.")
    if not words:
      first_line = line_number
    words.append(fields[0])
    tags.append(fields[3])
  flush()
  if not sentences:
    raise DataFormatError(f"{path}:1: no sentences (only blank or -DOCSTART- lines).")
  return sentences


def read_tfds(split: str, tfds_data_dir: str | None = None) -> list[Sentence]:
  """Sentences of tfds conll2003 (its NER class names are LABELS, in this order)."""
  records, info = task_sources.load_tfds("conll2003", split, tfds_data_dir)
  names = info.features["ner"].feature.names
  sentences = []
  for index, record in enumerate(records):
    where = f"tfds:conll2003:{split}[{index}]"
    words = tuple(task_sources.as_text(w) for w in record["tokens"])
    tags = tuple(names[int(t)] for t in record["ner"])
    if len(words) != len(tags):
      raise DataFormatError(f"{where}: {len(words)} tokens but {len(tags)} NER tags.")
    if words:
      sentences.append(Sentence(words, tags, where))
  return sentences


def read_examples(source: str, split: str = "train", *,
                  data_dir: str | None = None) -> list[Sentence]:
  """Sentences from a CoNLL file, or from tfds when source is "tfds:conll2003"."""
  if task_sources.is_tfds(source):
    if task_sources.tfds_name(source) != "conll2003":
      raise ValueError(f"Expected 'tfds:conll2003', got {source!r}.")
    return read_tfds(split)
  return read_file(task_sources.resolve_file(source, data_dir))


# ------------------------------------------------------------------------------------
# Features.
# ------------------------------------------------------------------------------------
def word_pieces(sentences: Sequence[Sentence], tokenizer) -> list[list[list[int]]]:
  """Piece ids per word per sentence, from one batched tokenizer call."""
  flat = tokenizer.encode_words([w for s in sentences for w in s.words])
  pieces, start = [], 0
  for sentence in sentences:
    words = flat[start:start + len(sentence.words)]
    pieces.append([ids or [tokenizer.unk_id] for ids in words])
    start += len(sentence.words)
  return pieces


def featurize(sentences: Sequence[Sentence], tokenizer,
              max_seq_length: int) -> dict[str, np.ndarray]:
  """Model inputs with labels on each word's first sub-token (module docstring)."""
  if not sentences:
    raise ValueError("No sentences to featurize.")
  if max_seq_length < 3:
    raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a word.")
  n, t = len(sentences), max_seq_length
  input_ids = np.full((n, t), tokenizer.pad_id, np.int32)
  attention_mask = np.zeros((n, t), np.int32)
  labels = np.zeros((n, t), np.int32)
  label_weights = np.zeros((n, t), np.float32)
  word_index = np.full((n, t), -1, np.int32)
  for row, (sentence, pieces) in enumerate(
      zip(sentences, word_pieces(sentences, tokenizer))):
    ids = [tokenizer.cls_id]
    for position, (tag, word_ids) in enumerate(zip(sentence.tags, pieces)):
      if len(ids) >= t - 1:
        break
      labels[row, len(ids)] = LABEL_IDS[tag]
      label_weights[row, len(ids)] = 1.0
      word_index[row, len(ids)] = position
      ids.extend(word_ids)
    ids = ids[:t - 1] + [tokenizer.sep_id]
    input_ids[row, :len(ids)] = ids
    attention_mask[row, :len(ids)] = 1
  return {"input_ids": input_ids, "token_type_ids": np.zeros((n, t), np.int32),
          "attention_mask": attention_mask, "labels": labels,
          "label_weights": label_weights, "word_index": word_index,
          "example_index": np.arange(n, dtype=np.int32)}


def load_split(config_like, split: str, tokenizer, max_seq_length: int):
  """(features, TaggingMetadata) of `split`; see the module docstring."""
  source = task_sources.split_source(config_like, split, DEFAULT_FILES.get(split))
  sentences = read_examples(source, split,
                            data_dir=task_sources.config_get(config_like, "data_dir"))
  features = featurize(sentences, tokenizer, max_seq_length)
  return features, TaggingMetadata(sentences, features["word_index"])


# ------------------------------------------------------------------------------------
# Back to words, and scores.
# ------------------------------------------------------------------------------------
def word_tags(predicted_ids: np.ndarray, word_index: np.ndarray,
              sentences: Sequence[Sentence]) -> tuple[list[list[str]], int]:
  """Per-word tags from per-token tag ids [N, T] (read at first sub-tokens).

  Returns (tags, cut_words): words without a first sub-token in the window (cut off
  by max_seq_length) get "O" and are counted in cut_words.
  """
  predicted_ids, word_index = np.asarray(predicted_ids), np.asarray(word_index)
  if predicted_ids.shape != word_index.shape or len(sentences) != len(word_index):
    raise ValueError(f"Predictions {predicted_ids.shape}, word_index "
                     f"{word_index.shape} and {len(sentences)} sentences disagree.")
  all_tags, cut_words = [], 0
  for row, sentence in enumerate(sentences):
    tags = ["O"] * len(sentence.words)
    first_tokens = np.flatnonzero(word_index[row] >= 0)
    for token in first_tokens:
      tags[word_index[row, token]] = LABELS[int(predicted_ids[row, token])]
    cut_words += len(sentence.words) - len(first_tokens)
    all_tags.append(tags)
  return all_tags, cut_words


def score(logits: np.ndarray, metadata: TaggingMetadata) -> dict:
  """seqeval-style entity P/R/F1 of the argmax tags, plus `cut_words`."""
  logits = np.asarray(logits)
  if logits.ndim != 3 or logits.shape[-1] != len(LABELS):
    raise ValueError(f"Expected logits [N, T, {len(LABELS)}], got {logits.shape}.")
  predicted, cut_words = word_tags(logits.argmax(-1), metadata.word_index,
                                   metadata.sentences)
  result = metrics.entity_scores([s.tags for s in metadata.sentences], predicted)
  result["cut_words"] = cut_words
  return result
