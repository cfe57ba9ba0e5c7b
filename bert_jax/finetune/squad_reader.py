"""SQuAD v1.1/v2.0: reader, doc-stride windows, and the held-back article split.

API (the same shape as glue.py, conll.py and swag.py; scoring in squad_postprocess.py):
  read_examples(source, split="train", *, data_dir=None, skip_bad_answers=False)
      -> list[SquadExample]
      source: a SQuAD JSON file ("squad/du2017_split/test-v1.1.json") or
      "tfds:squad/v1.1" / "tfds:squad/v2.0" (split dev -> validation).
  featurize(examples, tokenizer, max_seq_length, doc_stride=128, max_query_length=64,
            version_2=None) -> (features, SquadMetadata)
      features: input_ids, token_type_ids, attention_mask  int32 [F, T]
                start_positions, end_positions            int32 [F] (0 = [CLS]: no
                    answer, or the answer is not inside this window)
                example_index                             int32 [F]
  load_split(config_like, split, tokenizer, max_seq_length) -> (features, metadata)
      config_like: dict/ConfigDict with `sources` ({split: source}), optional
      `data_dir`, `doc_stride`, `max_query_length`, `version_2_with_negative` (default:
      True iff the examples hold an unanswerable question), and `heldout_fraction` /
      `heldout_seed`: when > 0, split "train" drops and split "heldout" keeps the
      articles that `split_by_article` holds back (the heldout source defaults to the
      train source): "train on du2017 test-v1.1.json, report EM/F1 on a held-back part".
  split_by_article(examples, heldout_fraction, seed=0) -> (kept, heldout)

Alignment follows BERT's run_squad: the context is split on whitespace into words
(char -> word), each word into the tokenizer's pieces as the word reads inside running
text (word -> pieces; `encode_words`, so byte-level BPE words keep their `Ġ`), and the
answer's word span is narrowed to the pieces that spell the tokenized answer (encoded
the same way). A query longer than
max_query_length pieces is cut; the context is cut into windows of
max_seq_length - query - 3 pieces, each starting doc_stride pieces after the previous.
A piece seen by several windows belongs ("max context") to the one where it has the
most context on its shorter side (+0.01 * window length; first window on ties).

Each answer must equal context[answer_start : answer_start + len(text)]. A mismatch
raises DataFormatError naming the file and JSON location (data[i].paragraphs[j].qas[k]
and the question id), or, with skip_bad_answers=True, the question is skipped and the
skips are printed with their count (so is a question missing a field).
"""
import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence

import numpy as np

from bert_jax.finetune import sources as task_sources
from bert_jax.finetune.sources import DataFormatError

WHITESPACE = frozenset(" \t\r\n\u202f")  # BERT run_squad's is_whitespace.
_WORD = re.compile("[^" + "".join(sorted(WHITESPACE)) + "]+")


@dataclasses.dataclass(frozen=True)
class Answer:
  text: str
  start: int  # Character offset into the context.


@dataclasses.dataclass(frozen=True)
class SquadExample:
  qid: str
  title: str
  question: str
  context: str
  answers: tuple[Answer, ...]  # Empty for an unanswerable (v2.0) question.
  is_impossible: bool
  provenance: str  # "<path>: data[i].paragraphs[j].qas[k]" or "tfds:<name>:<split>[i]"


# ------------------------------------------------------------------------------------
# Reading.
# ------------------------------------------------------------------------------------
def _check_answers(answers: Sequence[Answer], context: str, where: str) -> str | None:
  """None if every answer matches the context at its offset, else the problem."""
  for answer in answers:
    found = context[answer.start:answer.start + len(answer.text)]
    if answer.start < 0 or found != answer.text:
      return (f"{where}: answer {answer.text!r} does not match the context at offset "
              f"{answer.start} (found {found!r}).")
    if not answer.text.strip():
      return f"{where}: answer at offset {answer.start} is blank."
  return None


def _make_example(qid, title, question, context, answers, is_impossible, where,
                  labelled=True):
  if not context.strip():
    raise DataFormatError(f"{where}: empty context.")
  if labelled and is_impossible != (not answers):
    raise DataFormatError(f"{where}: is_impossible={is_impossible} but the question "
                          f"has {len(answers)} answer(s).")
  return SquadExample(qid, title, question, context, tuple(answers), is_impossible,
                      where)


def _keep_or_skip(examples, example, problem, skips: task_sources.Skips):
  if problem is None:
    examples.append(example)
  else:
    skips.bad_message(problem)


def _json_example(article, paragraph, qa, where: str, labelled: bool) -> SquadExample:
  """One question of a SQuAD file; unlabelled (a file to predict): its answers unread."""
  try:
    answers = ([Answer(a["text"], int(a["answer_start"])) for a in qa["answers"]]
               if labelled else [])
    return _make_example(qa["id"], article.get("title", ""), qa["question"],
                         paragraph["context"], answers,
                         labelled and bool(qa.get("is_impossible", False)), where, labelled)
  except KeyError as e:
    raise DataFormatError(f"{where}: missing or malformed field: no {e.args[0]!r}.") from None
  except (TypeError, ValueError) as e:
    if isinstance(e, DataFormatError):
      raise
    raise DataFormatError(f"{where}: missing or malformed field ({e!r}).") from None


def read_json(path: str, skip_bad_answers: bool = False, labelled: bool = True,
              skips: task_sources.Skips | None = None) -> list[SquadExample]:
  """Examples of a SQuAD v1.1/v2.0 JSON file (data -> paragraphs -> qas). A bad question
  (a missing field, an answer off its context) is the error naming it, or with
  skip_bad_answers skipped and counted (skips: where, a user's file's); labelled=False reads
  no answers (a test file)."""
  skips = skips or task_sources.Skips(path, skip_bad_answers, "questions", hint=False)
  with open(path, encoding="utf-8") as f:
    text = f.read()
  if not text.strip():
    raise DataFormatError(f"{path}:1: the file is empty.")
  try:
    articles = json.loads(text)["data"]
  except json.JSONDecodeError as e:
    raise DataFormatError(f"{path}:{e.lineno}: invalid JSON ({e.msg}).") from None
  except (KeyError, TypeError):
    raise DataFormatError(f"{path}: no top-level 'data' list.") from None
  examples = []
  for i, article in enumerate(articles):
    for j, paragraph in enumerate(article.get("paragraphs", ())):
      for k, qa in enumerate(paragraph.get("qas", ())):
        where = f"{path}: data[{i}].paragraphs[{j}].qas[{k}] (id {qa.get('id')})"
        try:
          example = _json_example(article, paragraph, qa, where, labelled)
          problem = _check_answers(example.answers, example.context, where)
        except DataFormatError as e:
          example, problem = None, str(e)
        _keep_or_skip(examples, example, problem, skips)
  _report(path, examples, skips)
  return examples


def _report(where: str, examples: list, skips: task_sources.Skips):
  skips.report(len(examples))
  if not examples:
    raise DataFormatError(f"{where}: no questions.")


def tfds_split(split: str) -> str:
  return "validation" if split == "dev" else split


def read_tfds(name: str, split: str, skip_bad_answers: bool = False,
              tfds_data_dir: str | None = None) -> list[SquadExample]:
  """Examples of tfds squad/v1.1 or squad/v2.0."""
  tf_split = tfds_split(split)
  records, _ = task_sources.load_tfds(name, tf_split, tfds_data_dir)
  examples = []
  skips = task_sources.Skips(f"tfds:{name}:{tf_split}", skip_bad_answers, "questions",
                             hint=False)
  for index, record in enumerate(records):
    where = f"tfds:{name}:{tf_split}[{index}]"
    answers = [Answer(task_sources.as_text(t), int(s)) for t, s in
               zip(record["answers"]["text"], record["answers"]["answer_start"])]
    text = {key: task_sources.as_text(record[key])
            for key in ("id", "title", "question", "context")}
    example = _make_example(text["id"], text["title"], text["question"],
                            text["context"], answers,
                            bool(record.get("is_impossible", False)), where)
    problem = _check_answers(answers, example.context, where)
    _keep_or_skip(examples, example, problem, skips)
  _report(f"tfds:{name}:{tf_split}", examples, skips)
  return examples


def read_examples(source: str, split: str = "train", *, data_dir: str | None = None,
                  skip_bad_answers: bool = False) -> list[SquadExample]:
  """Examples from a SQuAD JSON file or "tfds:squad/v1.1" / "tfds:squad/v2.0"."""
  if task_sources.is_tfds(source):
    name = task_sources.tfds_name(source)
    if name not in ("squad/v1.1", "squad/v2.0"):
      raise ValueError(f"Expected tfds:squad/v1.1 or tfds:squad/v2.0, got {source!r}.")
    return read_tfds(name, split, skip_bad_answers)
  return read_json(task_sources.resolve_file(source, data_dir), skip_bad_answers)


def split_by_article(examples: Sequence[SquadExample], heldout_fraction: float,
                     seed: int = 0) -> tuple[list[SquadExample], list[SquadExample]]:
  """(kept, held out): round(fraction * #titles) whole articles, at least one.

  Titles are ranked by a hash of (seed, title), so the choice does not depend on the
  file's order or on the other articles' names being present.
  """
  if not 0.0 < heldout_fraction < 1.0:
    raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}.")
  titles = sorted({e.title for e in examples},
                  key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())
  if len(titles) < 2:
    raise ValueError("Need at least two articles to hold one back.")
  count = min(len(titles) - 1, max(1, round(heldout_fraction * len(titles))))
  heldout = set(titles[:count])
  return ([e for e in examples if e.title not in heldout],
          [e for e in examples if e.title in heldout])


# ------------------------------------------------------------------------------------
# Alignment: characters -> words -> pieces.
# ------------------------------------------------------------------------------------
@dataclasses.dataclass
class ContextTokens:
  """One context split into whitespace words and the tokenizer's pieces."""
  text: str
  words: list[str]
  word_starts: list[int]        # Character offset of each word.
  char_to_word: np.ndarray      # int32 [chars]: the word of each non-space character.
  pieces: list[int]             # Piece ids of the whole context.
  piece_to_word: np.ndarray     # int32 [pieces]
  word_first_piece: np.ndarray  # int32 [words]: first piece (next word's if none).


def split_whitespace(context: str) -> tuple[list[str], list[int], np.ndarray]:
  """(words, word starts, char -> word) split on BERT's whitespace.

  A whitespace character maps to the word before it (to word 0 at the start).
  """
  matches = list(_WORD.finditer(context))
  starts = [m.start() for m in matches]
  char_to_word = np.searchsorted(starts, np.arange(len(context)), side="right") - 1
  return ([m.group() for m in matches], starts,
          np.maximum(char_to_word, 0).astype(np.int32))


def tokenize_contexts(contexts: Sequence[str], tokenizer) -> list[ContextTokens]:
  """ContextTokens of each context, with one batched tokenizer call."""
  splits = [split_whitespace(c) for c in contexts]
  flat = tokenizer.encode_words([w for words, _, _ in splits for w in words])
  result, offset = [], 0
  for text, (words, starts, char_to_word) in zip(contexts, splits):
    word_pieces = flat[offset:offset + len(words)]
    offset += len(words)
    lengths = np.array([len(p) for p in word_pieces], np.int64)
    result.append(ContextTokens(
        text, words, starts, char_to_word, [i for p in word_pieces for i in p],
        np.repeat(np.arange(len(words), dtype=np.int32), lengths),
        (np.cumsum(lengths) - lengths).astype(np.int32)))
  return result


def answer_piece_span(context: ContextTokens, answer: Answer,
                      answer_pieces: list[int]) -> tuple[int, int]:
  """Inclusive piece span of an answer, narrowed to the tokenized answer if found."""
  text = answer.text
  first_char = answer.start + len(text) - len(text.lstrip())
  last_char = answer.start + len(text.rstrip()) - 1
  first_word = int(context.char_to_word[first_char])
  last_word = int(context.char_to_word[last_char])
  start = int(context.word_first_piece[first_word])
  end = (int(context.word_first_piece[last_word + 1]) - 1
         if last_word + 1 < len(context.words) else len(context.pieces) - 1)
  start = min(start, end)  # Only when the answer's words have no pieces at all.
  for new_start in range(start, end + 1):  # BERT's _improve_answer_span.
    for new_end in range(end, new_start - 1, -1):
      if context.pieces[new_start:new_end + 1] == answer_pieces:
        return new_start, new_end
  return start, end


def doc_windows(num_pieces: int, max_pieces: int,
                doc_stride: int) -> list[tuple[int, int]]:
  """(start, length) windows covering the context pieces."""
  windows, start = [], 0
  while start < num_pieces:
    length = min(num_pieces - start, max_pieces)
    windows.append((start, length))
    if start + length == num_pieces:
      break
    start += min(length, doc_stride)
  return windows


def max_context_window(windows: Sequence[tuple[int, int]], num_pieces: int) -> np.ndarray:
  """int [pieces]: the window in which each piece has the most context."""
  scores = np.full((len(windows), num_pieces), -np.inf)
  for w, (start, length) in enumerate(windows):
    position = np.arange(start, start + length)
    scores[w, start:start + length] = (
        np.minimum(position - start, start + length - 1 - position) + 0.01 * length)
  return np.argmax(scores, axis=0)


# ------------------------------------------------------------------------------------
# Features.
# ------------------------------------------------------------------------------------
@dataclasses.dataclass
class SquadMetadata:
  """What postprocessing needs to turn logits [F, T] back into answer texts."""
  examples: list[SquadExample]
  contexts: list[ContextTokens]
  example_context: np.ndarray        # int32 [E]: index into contexts.
  feature_example_index: np.ndarray  # int32 [F]
  input_ids: np.ndarray              # int32 [F, T] (the features' array).
  token_to_word: np.ndarray          # int32 [F, T]: context word, -1 off the context.
  token_is_max_context: np.ndarray   # bool [F, T]
  version_2: bool                    # Null answers allowed (SQuAD 2.0).
  tokenizer: object                  # For the final-text projection.


def featurize(examples: Sequence[SquadExample], tokenizer, max_seq_length: int,
              doc_stride: int = 128, max_query_length: int = 64,
              version_2: bool | None = None):
  """(features, SquadMetadata): one row per window; see the module docstring."""
  if not examples:
    raise ValueError("No examples to featurize.")
  unique = {}
  example_context = np.array([unique.setdefault(e.context, len(unique))
                              for e in examples], np.int32)
  contexts = tokenize_contexts(list(unique), tokenizer)
  queries = [q[:max_query_length]
             for q in tokenizer.encode([e.question for e in examples])]
  first_answers = [e.answers[0] for e in examples if e.answers]
  answer_pieces = iter(tokenizer.encode_words([a.text for a in first_answers]))
  rows = {key: [] for key in ("input_ids", "start_positions", "end_positions",
                              "example_index", "token_to_word", "max_context",
                              "doc_offset")}
  for index, example in enumerate(examples):
    context, query = contexts[example_context[index]], queries[index]
    max_pieces = max_seq_length - len(query) - 3
    if max_pieces < 1:
      raise ValueError(f"max_seq_length={max_seq_length} leaves no room for the context "
                       f"after a {len(query)}-piece query.")
    answer_span = (answer_piece_span(context, example.answers[0], next(answer_pieces))
                   if example.answers else None)
    windows = doc_windows(len(context.pieces), max_pieces, doc_stride)
    best_window = max_context_window(windows, len(context.pieces))
    offset = len(query) + 2  # [CLS] query [SEP]
    for w, (start, length) in enumerate(windows):
      end = start + length - 1
      rows["input_ids"].append([tokenizer.cls_id, *query, tokenizer.sep_id,
                                *context.pieces[start:end + 1], tokenizer.sep_id])
      rows["token_to_word"].append(context.piece_to_word[start:end + 1])
      rows["max_context"].append(best_window[start:end + 1] == w)
      rows["doc_offset"].append(offset)
      inside = (answer_span is not None
                and start <= answer_span[0] <= answer_span[1] <= end)
      rows["start_positions"].append(answer_span[0] - start + offset if inside else 0)
      rows["end_positions"].append(answer_span[1] - start + offset if inside else 0)
      rows["example_index"].append(index)
  num_features = len(rows["input_ids"])
  shape = (num_features, max_seq_length)
  input_ids = np.full(shape, tokenizer.pad_id, np.int32)
  token_type_ids, attention_mask = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
  token_to_word = np.full(shape, -1, np.int32)
  max_context = np.zeros(shape, bool)
  for f in range(num_features):
    ids, offset = rows["input_ids"][f], rows["doc_offset"][f]
    input_ids[f, :len(ids)] = ids
    attention_mask[f, :len(ids)] = 1
    token_type_ids[f, offset:len(ids)] = 1
    token_to_word[f, offset:len(ids) - 1] = rows["token_to_word"][f]
    max_context[f, offset:len(ids) - 1] = rows["max_context"][f]
  features = {
      "input_ids": input_ids, "token_type_ids": token_type_ids,
      "attention_mask": attention_mask,
      "start_positions": np.array(rows["start_positions"], np.int32),
      "end_positions": np.array(rows["end_positions"], np.int32),
      "example_index": np.array(rows["example_index"], np.int32)}
  if version_2 is None:
    version_2 = any(e.is_impossible for e in examples)
  metadata = SquadMetadata(list(examples), contexts, example_context,
                           features["example_index"], input_ids, token_to_word,
                           max_context, bool(version_2), tokenizer)
  return features, metadata


def load_split(config_like, split: str, tokenizer, max_seq_length: int):
  """(features, SquadMetadata) of `split`; see the module docstring."""
  get = lambda key, default=None: task_sources.config_get(config_like, key, default)
  fraction = get("heldout_fraction", 0.0) or 0.0
  default_source = None
  if fraction and split == "heldout":
    default_source = task_sources.split_source(config_like, "train")
  source = task_sources.split_source(config_like, split, default_source)
  examples = read_examples(source, split, data_dir=get("data_dir"))
  if fraction and split in ("train", "heldout"):
    kept, heldout = split_by_article(examples, fraction, get("heldout_seed", 0))
    examples = kept if split == "train" else heldout
  return featurize(examples, tokenizer, max_seq_length,
                   doc_stride=get("doc_stride", 128),
                   max_query_length=get("max_query_length", 64),
                   version_2=get("version_2_with_negative", None))
