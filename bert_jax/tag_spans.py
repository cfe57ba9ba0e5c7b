"""Entity spans of a plain-format corpus from a fine-tuned NER tagger, as its span file.

  python -m bert_jax.tag_spans --model=runs/conll --input=runs/corpus/pretrain.txt \
      [--max_length=128 --batch_size=64]

--model is a CoNLL-2003 NER model (`configs/conll.py`'s workdir, or an HF
*ForTokenClassification folder with the 9 IOB2 tags of finetune/conll_reader.py) with its
tokenizer beside it. Every non-blank line of --input is tagged word by word (its
whitespace-separated words, each read at its first piece, as CoNLL fine-tuning reads
them); the IOB2 tags become entity spans (`iob_spans`: a B- tag or an I- tag of another
type than the word before starts one) and are written, one JSON line per text line, to
the span file beside --input (text/spans.py). Words past --max_length pieces get no tag.
The span file is what `prepare --with_spans` and config.data.spans read, so ERNIE's
entity-level masking (pretrain/masking.py) masks the tagger's entities whole.
"""
import functools

import jax
import numpy as np
from absl import flags

from bert_jax import cli
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


def tag_lines(model, variables, tokenizer, lines: list[str], max_length: int = 128,
              batch_size: int = 64) -> list[list[tuple[int, int, str]]]:
  """Each line's entity spans (none for a blank line), in fixed-size batches."""
  if getattr(model, "num_labels", None) != len(conll_reader.LABELS):
    raise ValueError(f"--model: a token classifier with the {len(conll_reader.LABELS)} "
                     "CoNLL-2003 tags is needed (configs/conll.py), got "
                     f"{type(model).__name__}")
  sentences = [conll_reader.Sentence(tuple(line.split()), ("O",) * len(line.split()),
                                     f"line {i + 1}") for i, line in enumerate(lines)]
  result = []
  for start in range(0, len(sentences), batch_size):
    part = sentences[start:start + batch_size]
    padded = part + [conll_reader.Sentence((), (), "padding")] * (batch_size - len(part))
    features = conll_reader.featurize(padded, tokenizer, max_length)
    ids = _tag_ids(model, variables, features["input_ids"], features["attention_mask"])
    tags, _ = conll_reader.word_tags(np.asarray(ids)[:len(part)],
                                     features["word_index"][:len(part)], part)
    result += [iob_spans(sentence_tags) for sentence_tags in tags]
  return result


if __name__ == "__main__":  # flags exist only when run as a program
  _MODEL = flags.DEFINE_string("model", None, "A CoNLL-2003 NER model (workdir or HF folder).")
  _INPUT = flags.DEFINE_string("input", None, "A plain-format corpus file to tag.")
  _MAX_LENGTH = flags.DEFINE_integer("max_length", 128, "Pieces per line (longer: cut).")
  _BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Lines per forward pass.")


def main(argv):
  del argv
  cli.quiet_logs()
  try:
    with open(_INPUT.value, encoding="utf-8") as f:
      lines = f.read().split("\n")
  except FileNotFoundError:
    raise FileNotFoundError(f"--input: {_INPUT.value} not found") from None
  if lines and lines[-1] == "":
    lines.pop()  # the final newline ends the last line
  model, variables = load_pretrained(_MODEL.value)
  tokenizer = model_tokenizer(_MODEL.value, tokenizer_kinds(model.config.family))
  found = tag_lines(model, variables, tokenizer, lines, _MAX_LENGTH.value, _BATCH_SIZE.value)
  output = spans_lib.span_path(_INPUT.value)
  with open(output, "w", encoding="utf-8") as f:
    f.writelines(spans_lib.format_line(line_spans) + "\n" for line_spans in found)
  print(f"Wrote {sum(map(len, found))} entity spans on {len(lines)} lines to {output}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["model", "input"])
  cli.run(main)
