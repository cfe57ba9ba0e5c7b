"""Tagging the user's own CoNLL-format files, any IOB2, IOB1 or IOBES tag set (configs/tag.py).

CoNLL-2003's task (conll.py: each word's first sub-token -> a tag, the reader, featurizer,
loss, span F1 and predictions of conll_reader) on a Column built from the training file:

config.data fields (besides finetune/base.py's):
  sources {train, dev, test}: files of one word per line, space-separated fields, the word
    first and the tag in field `column` (0-based; -1 = the last), blank lines between
    sentences (-DOCSTART- lines dropped); paths relative to the current directory (absolute
    allowed), not the data root. test ("" = none): a file to predict, its words in field 0
    (its tags, if any, unread).
  column: the tag field's index.
  scheme: the tags' scheme (SCHEMES): "iob2" (BIO: an I-TYPE continues a B-TYPE or I-TYPE),
    "iob1" (an entity starts with I-TYPE, B-TYPE only right after another of its type) or
    "iobes" (S-TYPE alone; B-TYPE I-TYPE... E-TYPE).
  skip_bad_rows: False: a bad line (no tag field, a tag outside the scheme or, in a dev
    file, outside the training file's tags) or a tag sequence the scheme forbids is the
    error "<file>:<line>: ..."; True: its sentence is skipped and the file's count (with the
    first) printed once.

The classes are the training file's tags as written, O first, then by type, prefixes in
alphabetical order (B before I); the trainer records them in the workdir (model_config.json
"labels", the HF export's id2label). Scores: seqeval's entity precision, recall and F1
(eval_f1) and each type's F1 (metrics.entity_scores, seqeval's default mode: conlleval's
chunks, which read every scheme above); predictions (config.predict): the test file's
WORKDIR/predictions_<its name>.txt, `word predicted` per line, or without one the dev file's
WORKDIR/predictions_tag.txt, `word gold predicted`.
"""
import functools
import os

from bert_jax.finetune import base, conll_reader, metrics, shards
from bert_jax.finetune.conll import ConllTask
from bert_jax.finetune.sources import DataFormatError, Skips, user_file

PREDICTIONS_FILE = "predictions_tag.txt"


def _parse(tag: str, where: str, prefixes: str, scheme: str) -> tuple[str, str]:
  """(prefix, type) of a tag of `scheme` ("O", "" for O); an error naming the line else."""
  if tag == "O":
    return "O", ""
  prefix, _, kind = tag.partition("-")
  if prefix not in prefixes or not kind:
    forms = ", ".join(f"{p}-TYPE" for p in prefixes)
    raise DataFormatError(f"{where}: tag {tag!r} is not {scheme} (O, {forms}); other tag "
                          "schemes: scheme=iob1, scheme=iobes")
  return prefix, kind


def _tag(parsed: tuple[str, str]) -> str:
  return "O" if parsed[0] == "O" else f"{parsed[0]}-{parsed[1]}"


def _check_bi(tags, lines, scheme: str, continues: str) -> None:
  """IOB2 and IOB1: O, B-TYPE, I-TYPE, where the prefix `continues` ("I" in IOB2, "B" in
  IOB1) may only follow a tag of its own type."""
  previous = ("O", "")
  for tag, where in zip(tags, lines):
    prefix, kind = _parse(tag, where, "BI", scheme)
    if prefix == continues and previous[1] != kind:
      starts = "B" if continues == "I" else "I"
      rule = f": B-{kind} only right after another {kind}" if continues == "B" else ""
      raise DataFormatError(f"{where}: tag {tag!r} follows {_tag(previous)!r}; an entity "
                            f"starts with {starts}-{kind} ({scheme}{rule})")
    previous = prefix, kind


# IOB2 (BIO): an I-TYPE continues a B-TYPE or I-TYPE.
check_iob2 = functools.partial(_check_bi, scheme="IOB2", continues="I")
# IOB1 (CoNLL-2003's original files): an entity starts with I-TYPE; a B-TYPE starts one only
# right after another of its type.
check_iob1 = functools.partial(_check_bi, scheme="IOB1", continues="B")


def check_iobes(tags, lines) -> None:
  """IOBES (BIOES): S-TYPE a one-word entity; B-TYPE, I-TYPE..., E-TYPE a longer one."""
  previous, last = ("O", ""), ""
  for tag, where in zip(tags, lines):
    prefix, kind = _parse(tag, where, "BIES", "IOBES")
    inside = previous[0] in ("B", "I")
    if prefix in ("I", "E") and not (inside and previous[1] == kind):
      raise DataFormatError(f"{where}: tag {tag!r} follows {_tag(previous)!r}; an entity "
                            f"starts with B-{kind}, or is S-{kind} (IOBES)")
    if prefix in ("B", "S", "O") and inside:
      raise DataFormatError(f"{where}: tag {tag!r} follows {_tag(previous)!r}, whose entity "
                            f"ends with E-{previous[1]} (IOBES)")
    previous, last = (prefix, kind), where
  if previous[0] in ("B", "I"):
    raise DataFormatError(f"{last}: the sentence ends inside a {previous[1]} entity, which "
                          f"ends with E-{previous[1]} (IOBES)")


# config.data.scheme -> the sequences it allows; each scores as seqeval's default mode
# (conlleval) reads it: a chunk starts at B- or S-, or at an I- / E- after O or another type.
SCHEMES = {"iob2": check_iob2, "bio": check_iob2, "iob1": check_iob1, "iobes": check_iobes,
           "bioes": check_iobes}


def scheme_check(name: str):
  """SCHEMES[name]; an unknown name is a one-line error."""
  if name not in SCHEMES:
    raise ValueError(f"config.data.scheme={name!r}: expected one of {sorted(SCHEMES)}")
  return SCHEMES[name]


def tag_order(tags) -> tuple[str, ...]:
  """The classes: O first, then by type, B before I (and E, S)."""
  return tuple(sorted(set(tags) | {"O"}, key=lambda t: (t != "O", t[2:], t[:1])))


def user_column(index: int, labels=None, scheme: str = "iob2") -> conll_reader.Column:
  """A tag column of a user's files: any width, checked as `scheme`, span F1."""
  return conll_reader.Column(index, "", labels, metrics.entity_scores, PREDICTIONS_FILE,
                             name="the", width=None, check=scheme_check(scheme))


# A file to predict: the words alone (field 0); its tags, if any, unread.
WORDS = conll_reader.Column(0, "", None, metrics.entity_scores, PREDICTIONS_FILE,
                            name="the", width=None)


class TagTask(ConllTask):
  """CoNLL tagging on the files of config.data.sources, with their own tags."""
  name = "tag"
  reader = None  # load_split reads the files

  def __init__(self, config, model_config):  # pylint: disable=super-init-not-called
    self.config = config
    index = int(config.data.column)
    self.column = user_column(index, tag_order(t for s in self._train for t in s.tags),
                              self.scheme)
    self.label_names = self.column.labels
    base.FinetuningTask.__init__(self, config, model_config)

  @property
  def scheme(self) -> str:
    return str(self.config.data.get("scheme") or "iob2")

  @functools.cached_property
  def _train(self) -> list[conll_reader.Sentence]:
    """The training file's sentences, read once (their tags give the classes); with
    config.data.shards, the training split's file's."""
    data = self.config.data
    if data.get("shards"):
      return shards.from_records(self.example_type,
                                 shards.read_split(self.config, data.train_split)[1])
    return self.read(data.sources[data.train_split], user_column(int(data.column), None,
                                                                  self.scheme))

  def read(self, path: str, column: conll_reader.Column) -> list[conll_reader.Sentence]:
    return conll_reader.read_file(user_file(path), column, self.skips(path, "sentences"))

  def load_split(self, split, tokenizer):
    data = self.config.data
    if split == data.train_split:
      sentences = self._train
    elif split == data.get("predict_split"):  # tagged "O" for the featurizer, not read
      sentences = [conll_reader.Sentence(s.words, ("O",) * len(s.words), s.provenance)
                   for s in self.read(data.sources[split], WORDS)]
    else:
      sentences = self.read(data.sources[split], self.column)
    features = conll_reader.featurize(sentences, tokenizer, data.max_seq_length, self.column)
    return features, conll_reader.TaggingMetadata(sentences, features["word_index"],
                                                  self.column)

  def write_predictions(self, evaluation, inputs, workdir):
    """The test file's tags, `word predicted` per line in its sentences' order (a blank
    line between them) as WORKDIR/predictions_<its name>.txt; without one, the dev file's
    `word gold predicted` (WORKDIR/predictions_tag.txt)."""
    if inputs.predict is None:
      return super().write_predictions(evaluation, inputs, workdir)
    metadata = inputs.predict_metadata
    ids = evaluation.outputs["predict_logits"].argmax(-1)
    tags, _ = conll_reader.word_tags(ids, metadata.word_index, metadata.sentences,
                                     self.column.labels)
    stem = os.path.splitext(os.path.basename(self.config.data.sources[self.predict_split()]))[0]
    path = os.path.join(workdir, f"predictions_{stem}.txt")
    with open(path, "w", encoding="utf-8") as f:
      for sentence, predicted in zip(metadata.sentences, tags):
        f.writelines(f"{word} {tag}\n" for word, tag in zip(sentence.words, predicted))
        f.write("\n")
    return path


def read(path: str, column: conll_reader.Column,
         skip_bad_rows: bool = False) -> list[conll_reader.Sentence]:
  """The sentences of a user's file (relative paths from the current directory); a bad line
  or tag sequence is the error naming it, or (skip_bad_rows) its sentence skipped, counted."""
  return conll_reader.read_file(user_file(path), column,
                                Skips(path, skip_bad_rows, "sentences"))
