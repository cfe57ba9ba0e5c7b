"""Tagging the user's own CoNLL-format files, any BIO tag set (configs/tag.py).

CoNLL-2003's task (conll.py: each word's first sub-token -> a tag, the reader, featurizer,
loss, span F1 and predictions of conll_reader) on a Column built from the training file:

config.data fields (besides finetune/base.py's):
  sources {train, dev}: files of one word per line, space-separated fields, the word first
    and the tag in field `column` (0-based; -1 = the last), blank lines between sentences
    (-DOCSTART- lines dropped); paths relative to the current directory (absolute allowed),
    not the data root.
  column: the tag field's index.

The tags must be IOB2 (`check_bio`): O, B-TYPE, I-TYPE, an I-TYPE only after B-TYPE or
I-TYPE; a line that breaks it is the error "<file>:<line>: ...". The classes are the training
file's tags, O first, then by type, B before I; the trainer records them in the workdir
(model_config.json "labels", the HF export's id2label). A dev tag the training file lacks is
an error naming its line. Scores: seqeval's entity precision, recall and F1 (eval_f1) and each
type's F1 (metrics.entity_scores); predictions (config.predict): WORKDIR/predictions_tag.txt,
`word gold predicted` per line.
"""
import functools

from bert_jax.finetune import base, conll_reader, metrics
from bert_jax.finetune.conll import ConllTask
from bert_jax.finetune.sources import DataFormatError, user_file

PREDICTIONS_FILE = "predictions_tag.txt"


def check_bio(tags, lines) -> None:
  """IOB2: each tag O, B-TYPE or I-TYPE, and an I-TYPE continues a B-TYPE or I-TYPE;
  lines: where each tag is ("<file>:<line>"), for the error."""
  previous = "O"
  for tag, where in zip(tags, lines):
    prefix, _, kind = tag.partition("-")
    if tag != "O" and (prefix not in ("B", "I") or not kind):
      raise DataFormatError(f"{where}: tag {tag!r} is not BIO (O, B-TYPE or I-TYPE)")
    if prefix == "I" and previous[2:] != kind:
      raise DataFormatError(f"{where}: tag {tag!r} follows {previous!r}; an entity starts "
                            f"with B-{kind} (IOB2)")
    previous = tag


def tag_order(tags) -> tuple[str, ...]:
  """The classes: O first, then by type, B before I."""
  return tuple(sorted(set(tags) | {"O"}, key=lambda t: (t != "O", t[2:], t[:1])))


def user_column(index: int, labels=None) -> conll_reader.Column:
  """A tag column of a user's files: any width, BIO-checked, span F1."""
  return conll_reader.Column(index, "", labels, metrics.entity_scores, PREDICTIONS_FILE,
                             name="the", width=None, check=check_bio)


class TagTask(ConllTask):
  """CoNLL tagging on the files of config.data.sources, with their own tags."""
  name = "tag"
  reader = None  # load_split reads the files

  def __init__(self, config, model_config):  # pylint: disable=super-init-not-called
    self.config = config
    index = int(config.data.column)
    self.column = user_column(index, tag_order(
        t for s in self._train for t in s.tags))
    self.label_names = self.column.labels
    base.FinetuningTask.__init__(self, config, model_config)

  @functools.cached_property
  def _train(self) -> list[conll_reader.Sentence]:
    """The training file's sentences, read once (their tags give the classes)."""
    data = self.config.data
    return read(data.sources[data.train_split], user_column(int(data.column)))

  def load_split(self, split, tokenizer):
    data = self.config.data
    sentences = (self._train if split == data.train_split else
                 read(data.sources[split], self.column))
    features = conll_reader.featurize(sentences, tokenizer, data.max_seq_length, self.column)
    return features, conll_reader.TaggingMetadata(sentences, features["word_index"],
                                                  self.column)


def read(path: str, column: conll_reader.Column) -> list[conll_reader.Sentence]:
  """The sentences of a user's file (relative paths from the current directory)."""
  return conll_reader.read_file(user_file(path), column)
