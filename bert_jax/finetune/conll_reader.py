"""CoNLL-2003 tagging (NER, POS, chunks): reader, first-sub-token featuriser, word-level scoring.

The files' four columns are `token POS chunk NER`; each tag column is a task (COLUMNS):
  "ner"    the 9 IOB2 entity tags; seqeval's entity P/R/F1 (the CoNLL-2003 shared task's)
  "pos"    the 47 Penn Treebank tags of tfds/HF conll2003; token accuracy over all words
  "chunk"  the 23 IOB2 chunk tags (NP, VP, PP ...); conlleval's chunk P/R/F1 (the
           CoNLL-2000 shared task's, which seqeval's default mode computes)
A tag's id is its index in the column's `labels` (tfds's and HF's class order).

API (the same shape as glue.py, squad.py and swag.py):
  LABELS                              the 9 NER tags (COLUMNS["ner"].labels)
  get_column(name) -> Column          COLUMNS[name], or a one-line error (a Column as it is:
                                      a user's files' tag column, finetune/tag.py)
  read_examples(source, split="train", *, data_dir=None, column="ner") -> list[Sentence]
      source: a file in the CoNLL-2003 format ("conll2003/valid.txt") or
      "tfds:conll2003" (tfds splits train/dev/test); Sentence.tags are `column`'s.
  featurize(sentences, tokenizer, max_seq_length, column="ner") -> dict of numpy arrays:
      input_ids, token_type_ids, attention_mask  int32 [N, T]
      labels         int32 [N, T]   tag id at each word's first sub-token, 0 elsewhere
      label_weights  float32 [N, T] 1 at first sub-tokens, 0 elsewhere (loss mask)
      word_index     int32 [N, T]   word position at first sub-tokens, -1 elsewhere
      example_index  int32 [N]
  load_split(config_like, split, tokenizer, max_seq_length) -> (features, metadata)
      config_like: dict/ConfigDict with optional `data_dir`, `sources` ({split: source},
      default DEFAULT_FILES) and `column` (default "ner"); metadata is a TaggingMetadata.
  word_tags(predicted_ids, word_index, sentences, labels=LABELS) -> (tags per word,
      cut word count)
  score(logits, metadata) -> the column's scores (NER, chunks: precision, recall, f1,
      per_type; POS: accuracy) and cut_words

One sentence is one sequence: [CLS] pieces [SEP], cut at max_seq_length, each word's
pieces those it has inside running text (`tokenizer.encode_words`: byte-level BPE's
`Ġword`, as HF RoBERTa encodes split words with add_prefix_space). Words that
do not fit are predicted "O" at scoring time and counted in `cut_words`; the scores
are still over every gold entity, chunk or word ("O" is no POS tag: a cut word is a POS
error). A word the tokenizer maps to no piece (e.g. only
control characters) is fed as [UNK], so every word keeps a first sub-token.
"""
import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from bert_jax.finetune import metrics
from bert_jax.finetune import sources as task_sources
from bert_jax.finetune.sources import DataFormatError

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC",
          "I-MISC")
LABEL_IDS = {tag: i for i, tag in enumerate(LABELS)}
POS_LABELS = ('"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX",
              "FW", "IN", "JJ", "JJR", "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS",
              "NN|SYM", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS", "RP", "SYM", "TO",
              "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB")
CHUNK_LABELS = ("O", "B-ADJP", "I-ADJP", "B-ADVP", "I-ADVP", "B-CONJP", "I-CONJP",
                "B-INTJ", "I-INTJ", "B-LST", "I-LST", "B-NP", "I-NP", "B-PP", "I-PP",
                "B-PRT", "I-PRT", "B-SBAR", "I-SBAR", "B-UCP", "I-UCP", "B-VP", "I-VP")
DEFAULT_FILES = {"train": "conll2003/train.txt", "dev": "conll2003/valid.txt",
                 "test": "conll2003/test.txt"}
DOCSTART = "-DOCSTART-"
NUM_COLUMNS = 4  # token POS chunk NER


@dataclasses.dataclass(frozen=True)
class Column:
  """One tag column of the files: where it is, its classes and its official score.

  index: its place in `token POS chunk NER`; tfds_feature: its tfds conll2003 feature;
  labels: its tags in class-id order (None: any, while a training file's are read);
  score: (gold tags, predicted tags), one sequence per sentence -> {metric: value}
  (bert_jax/finetune/metrics.py); predictions_file: what write_predictions names its
  `word gold predicted` file. name: the tags' name in messages. width: the fields a line
  holds (NUM_COLUMNS), None: any number that has `index` (a user's files: finetune/tag.py).
  check: (a sentence's tags, the lines they are on) -> None, raising DataFormatError on a
  tag sequence the scheme forbids (None: none checked).
  """
  index: int
  tfds_feature: str
  labels: tuple[str, ...] | None
  score: Callable[[Sequence[Sequence[str]], Sequence[Sequence[str]]], dict]
  predictions_file: str
  name: str = ""
  width: int | None = NUM_COLUMNS
  check: Callable[[Sequence[str], Sequence[str]], None] | None = None

  @property
  def label_ids(self) -> dict[str, int]:
    return {tag: i for i, tag in enumerate(self.labels)}


# config.data.column -> the tags a CoNLL-2003 run learns.
COLUMNS = {
    "ner": Column(3, "ner", LABELS, metrics.entity_scores, "predictions_conll.txt", "NER"),
    "pos": Column(1, "pos", POS_LABELS, metrics.tag_accuracy, "predictions_conll_pos.txt",
                  "POS"),
    "chunk": Column(2, "chunks", CHUNK_LABELS, metrics.entity_scores,
                    "predictions_conll_chunk.txt", "CHUNK"),
}


def get_column(name: "str | Column") -> Column:
  """COLUMNS[name]; a Column as it is (a user's tag column: finetune/tag.py)."""
  if isinstance(name, Column):
    return name
  if name not in COLUMNS:
    raise ValueError(f"config.data.column={name!r}: expected one of {sorted(COLUMNS)} (the "
                     "CoNLL-2003 tag column to learn)")
  return COLUMNS[name]


@dataclasses.dataclass(frozen=True)
class Sentence:
  words: tuple[str, ...]
  tags: tuple[str, ...]   # One tag per word, from the read column's labels (NER: LABELS).
  provenance: str         # "<path>:<first line>" or "tfds:conll2003:<split>[<i>]".


@dataclasses.dataclass(frozen=True)
class TaggingMetadata:
  """What `score` needs besides the logits."""
  sentences: list[Sentence]
  word_index: np.ndarray  # int32 [N, T], as in the features.
  column: "str | Column" = "ner"  # The tags' column (COLUMNS, or a user's: finetune/tag.py).


# ------------------------------------------------------------------------------------
# Reading.
# ------------------------------------------------------------------------------------
def read_file(path: str, column: "str | Column" = "ner",
              skips: task_sources.Skips | None = None) -> list[Sentence]:
  """Sentences of a space-separated `token POS chunk NER` file (a Column of another width:
  `token ... tag ...`), tagged with `column`'s tags.

  Blank lines end a sentence and -DOCSTART- lines (document breaks) are dropped. A bad line
  or tag sequence is a DataFormatError naming its line; with `skips` (a user's files), its
  sentence goes to skips (the error, or skipped and counted: skip_bad_rows).
  """
  spec = get_column(column)
  known = None if spec.labels is None else spec.label_ids
  sentences, words, tags, lines, first_line = [], [], [], [], 0
  problem = []  # the sentence's first bad line (with skips)

  def fail(message: str) -> None:
    if skips is None:
      raise DataFormatError(message)
    problem.append(message)

  def flush():
    if words or problem:
      if not problem and spec.check is not None:
        try:
          spec.check(tags, lines)
        except DataFormatError as e:
          fail(str(e))
      if problem:
        skips.bad_message(problem[0])
      else:
        sentences.append(Sentence(tuple(words), tuple(tags), f"{path}:{first_line}"))
      for values in (words, tags, lines, problem):
        values.clear()

  for line_number, text in task_sources.read_lines(path):
    fields = text.split()
    if not fields or fields[0] == DOCSTART:
      flush()
      continue
    where = f"{path}:{line_number}"
    if not words:
      first_line = line_number
    if spec.width is not None and len(fields) != spec.width:
      fail(f"{where}: expected {spec.width} space-separated columns (token POS chunk NER), "
           f"found {len(fields)}.")
      continue
    if spec.width is None and not ((len(fields) > 1 or spec.index == 0)
                                   and -len(fields) <= spec.index < len(fields)):
      fail(f"{where}: {len(fields)} space-separated columns, no tag column {spec.index} (a "
           "line is `word ... tag`)")
      continue
    tag = fields[spec.index]
    if known is not None and tag not in known:
      fail(f"{where}: {spec.name} tag {tag!r} is not one of {list(spec.labels)}.")
      continue
    words.append(fields[0])
    tags.append(tag)
    lines.append(where)
  flush()
  if skips is not None:
    skips.report(len(sentences))
  if not sentences:
    raise DataFormatError(f"{path}:1: no sentences (only blank or -DOCSTART- lines"
                          f"{', or every one skipped' if skips is not None else ''}).")
  return sentences


def read_tfds(split: str, tfds_data_dir: str | None = None,
              column: str = "ner") -> list[Sentence]:
  """Sentences of tfds conll2003 (its class names of each column are COLUMNS' labels, in
  this order)."""
  feature = get_column(column).tfds_feature
  records, info = task_sources.load_tfds("conll2003", split, tfds_data_dir)
  names = info.features[feature].feature.names
  sentences = []
  for index, record in enumerate(records):
    where = f"tfds:conll2003:{split}[{index}]"
    words = tuple(task_sources.as_text(w) for w in record["tokens"])
    tags = tuple(names[int(t)] for t in record[feature])
    if len(words) != len(tags):
      raise DataFormatError(f"{where}: {len(words)} tokens but {len(tags)} "
                            f"{column.upper()} tags.")
    if words:
      sentences.append(Sentence(words, tags, where))
  return sentences


def read_examples(source: str, split: str = "train", *, data_dir: str | None = None,
                  column: str = "ner") -> list[Sentence]:
  """Sentences from a CoNLL file, or from tfds when source is "tfds:conll2003"."""
  if task_sources.is_tfds(source):
    if task_sources.tfds_name(source) != "conll2003":
      raise ValueError(f"Expected 'tfds:conll2003', got {source!r}.")
    return read_tfds(split, column=column)
  return read_file(task_sources.resolve_file(source, data_dir), column)


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


def featurize(sentences: Sequence[Sentence], tokenizer, max_seq_length: int,
              column: "str | Column" = "ner") -> dict[str, np.ndarray]:
  """Model inputs with `column`'s tag ids on each word's first sub-token (module docstring)."""
  label_ids = get_column(column).label_ids
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
      labels[row, len(ids)] = label_ids[tag]
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
  column = task_sources.config_get(config_like, "column", "ner")
  sentences = read_examples(source, split, column=column,
                            data_dir=task_sources.config_get(config_like, "data_dir"))
  features = featurize(sentences, tokenizer, max_seq_length, column)
  return features, TaggingMetadata(sentences, features["word_index"], column)


# ------------------------------------------------------------------------------------
# Back to words, and scores.
# ------------------------------------------------------------------------------------
def word_tags(predicted_ids: np.ndarray, word_index: np.ndarray,
              sentences: Sequence[Sentence],
              labels: Sequence[str] = LABELS) -> tuple[list[list[str]], int]:
  """Per-word tags (`labels`, the column's) from per-token tag ids [N, T] (read at first
  sub-tokens).

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
      tags[word_index[row, token]] = labels[int(predicted_ids[row, token])]
    cut_words += len(sentence.words) - len(first_tokens)
    all_tags.append(tags)
  return all_tags, cut_words


def score(logits: np.ndarray, metadata: TaggingMetadata) -> dict:
  """The column's official score of the argmax tags (NER, chunks: seqeval-style
  P/R/F1; POS: token accuracy), plus `cut_words`."""
  column = get_column(metadata.column)
  logits = np.asarray(logits)
  if logits.ndim != 3 or logits.shape[-1] != len(column.labels):
    raise ValueError(f"Expected logits [N, T, {len(column.labels)}], got {logits.shape}.")
  predicted, cut_words = word_tags(logits.argmax(-1), metadata.word_index,
                                   metadata.sentences, column.labels)
  result = column.score([s.tags for s in metadata.sentences], predicted)
  result["cut_words"] = cut_words
  return result
