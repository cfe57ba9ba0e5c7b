r"""Entity and phrase spans of a plain-format corpus from fine-tuned CoNLL-2003 taggers, as
its span file: the units of ERNIE's knowledge masking.

  python -m bert_jax.commands.tag_spans --model=runs/conll --phrase_model=runs/conll_chunk \
      --input=runs/corpus/pretrain.txt [--max_length=128 --batch_size=64]

--model is a CoNLL-2003 NER model (`configs/conll.py`'s workdir, or an HF
*ForTokenClassification folder with the 9 IOB2 tags of finetune/conll_reader.py);
--phrase_model a chunker (`configs/conll.py:column=chunk`, the 23 IOB2 chunk tags); either
may be left out; each has its tokenizer beside it. Every non-blank line of --input is
tagged word by word (its whitespace-separated words, each read at its first piece, as
CoNLL fine-tuning reads them); the IOB2 tags become spans (`iob_spans`: a B- tag or an
I- tag of another type than the word before starts one), the NER model's of kind
"entity" and the chunker's of kind "phrase" (NP, VP, PP ... chunks, one word or more), and
are written, one JSON line per text line, to the span file beside --input
(text/spans.py). Words past --max_length pieces get no tag. The span file is what
`prepare --with_spans` and config.data.spans read, so ERNIE's entity- and phrase-level
masking (pretrain/masking.py) masks the taggers' units whole.
"""
import functools

import jax
import numpy as np
from absl import flags

from bert_jax.startup import cli
from bert_jax.files import storage
from bert_jax.finetune import conll_reader
from bert_jax.text import spans as spans_lib
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import model_tokenizer
from bert_jax.weights import load_pretrained


def iob_spans(tags: list[str], kind: str = "entity") -> list[tuple[int, int, str]]:
  """IOB2 tags per word -> (start, end, kind) spans, end exclusive (conlleval's chunks)."""
  spans, start, current = [], None, None
  for i, tag in enumerate([*tags, "O"]):
    prefix, _, entity_type = tag.partition("-")
    continues = prefix == "I" and entity_type == current
    if start is not None and not continues:
      spans.append((start, i, kind))
      start, current = None, None
    if prefix in ("B", "I") and not continues:
      start, current = i, entity_type
  return spans


@functools.partial(jax.jit, static_argnames=("model",))
def _tag_ids(model, variables, input_ids, attention_mask):
  return model.apply(variables, input_ids, None, attention_mask).logits.argmax(-1)


# The CoNLL-2003 column a tagger learned -> (the kind of span its chunks are, its flag).
SPAN_COLUMNS = {"ner": ("entity", "--model"), "chunk": ("phrase", "--phrase_model")}


def tag_lines(model, variables, tokenizer, lines: list[str], max_length: int = 128,
              batch_size: int = 64, column: str = "ner",
              progress: bool = False) -> list[list[tuple[int, int, str]]]:
  """Each line's spans of `column`'s tagger (none for a blank line), in batches of
  `batch_size` lines of alike length: kind "entity" for an NER model ("ner"), "phrase" for
  a chunker ("chunk"). progress: a line every 100 batches."""
  kind, flag = SPAN_COLUMNS[column]
  labels = conll_reader.get_column(column).labels
  if getattr(model, "num_labels", None) != len(labels):
    raise ValueError(f"{flag}: a token classifier with the {len(labels)} CoNLL-2003 "
                     f"{column} tags is needed (configs/conll.py"
                     f"{'' if column == 'ner' else ':column=' + column}), got "
                     f"{type(model).__name__} with {getattr(model, 'num_labels', None)} labels")
  sentences = [conll_reader.Sentence(tuple(line.split()), ("O",) * len(line.split()),
                                     f"line {i + 1}") for i, line in enumerate(lines)]
  # Lines in order of length, so a batch's lines are alike and it runs at the smallest
  # width that holds them (`batch_width`: a few compiled shapes, little padding); results
  # go back to the lines' own order.
  order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].words))
  result = [None] * len(sentences)
  for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    part = [sentences[i] for i in rows]
    padded = part + [conll_reader.Sentence((), (), "padding")] * (batch_size - len(part))
    features = conll_reader.featurize(padded, tokenizer, max_length)
    width = batch_width(int(features["attention_mask"].sum(1).max()), max_length)
    ids = _tag_ids(model, variables, features["input_ids"][:, :width],
                   features["attention_mask"][:, :width])
    tags, _ = conll_reader.word_tags(np.asarray(ids)[:len(part)],
                                     features["word_index"][:len(part), :width], part, labels)
    for i, sentence_tags in zip(rows, tags):
      result[i] = iob_spans(sentence_tags, kind)
    done = start + len(rows)
    if progress and (done == len(order) or done // batch_size % 100 == 0):
      print(f"{column}: tagged {done:,} of {len(order):,} lines", flush=True)
  return result


def batch_width(pieces: int, max_length: int) -> int:
  """The smallest of 16, 32, 64, ... that holds `pieces`, at most max_length."""
  width = 16
  while width < pieces:
    width *= 2
  return min(width, max_length)

def tag_file_lines(lines: list[str], models: dict[str, str], max_length: int = 128,
                   batch_size: int = 64,
                   progress: bool = False) -> list[list[tuple[int, int, str]]]:
  """Each line's spans from every tagger of `models` ({column: model path}), merged in
  the order of their start word."""
  merged = [[] for _ in lines]
  for column, path in models.items():
    model, variables = load_pretrained(path)
    tokenizer = model_tokenizer(path, tokenizer_kinds(model.config.family))
    found = tag_lines(model, variables, tokenizer, lines, max_length, batch_size, column,
                      progress)
    for line_spans, new in zip(merged, found):
      line_spans += new
  return [sorted(line_spans) for line_spans in merged]


if __name__ == "__main__":  # flags exist only when run as a program
  _MODEL = flags.DEFINE_string("model", None, "A CoNLL-2003 NER model (workdir or HF "
                               "folder): its entities become spans of kind entity.")
  _PHRASE_MODEL = flags.DEFINE_string("phrase_model", None, "A CoNLL-2003 chunker "
                                      "(configs/conll.py:column=chunk): its chunks become "
                                      "spans of kind phrase.")
  _INPUT = flags.DEFINE_string("input", None, "A plain-format corpus file to tag.")
  _MAX_LENGTH = flags.DEFINE_integer("max_length", 128, "Pieces per line (longer: cut).")
  _BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Lines per forward pass.")


def main(argv):
  del argv
  cli.quiet_logs()
  try:
    with storage.open_file(_INPUT.value) as f:
      lines = f.read().split("\n")
  except FileNotFoundError:
    raise FileNotFoundError(f"--input: {_INPUT.value} not found") from None
  if lines and lines[-1] == "":
    lines.pop()  # the final newline ends the last line
  models = {column: path for column, path in (("ner", _MODEL.value),
                                               ("chunk", _PHRASE_MODEL.value)) if path}
  if not models:
    raise ValueError("--model or --phrase_model: give a tagger (an NER model, a chunker "
                     "or both)")
  found = tag_file_lines(lines, models, _MAX_LENGTH.value, _BATCH_SIZE.value, progress=True)
  output = spans_lib.span_path(_INPUT.value)
  with storage.open_file(output, "w") as f:
    f.writelines(spans_lib.format_line(line_spans) + "\n" for line_spans in found)
  counts = {kind: sum(k == kind for line in found for _, _, k in line)
            for kind in (SPAN_COLUMNS[column][0] for column in models)}
  print(f"Wrote {' and '.join(f'{n} {kind} spans' for kind, n in counts.items())} on "
        f"{len(lines)} lines to {output}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["input"])
  cli.run(main, urls=("model", "phrase_model", "input"))
