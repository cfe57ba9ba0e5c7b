r"""Tagging your own CoNLL-format files, any BIO tag set: each word's first sub-token -> a tag.

  python -m bert_jax.train --workdir=runs/mytags \
      --config=configs/tag.py:train=train.txt,dev=dev.txt[,column=-1]

train, dev: one word per line, space-separated fields with the word first and the tag in
field `column` (0-based; -1, the default, is the last: `word tag`, or CoNLL-2003's `word POS
chunk NER`), a blank line between sentences (-DOCSTART- lines dropped). Their paths are
relative to the current directory (absolute allowed): your files, not the data root. The
tags must be IOB2 (O, B-TYPE, I-TYPE; an I-TYPE continues its B-TYPE): a line that breaks
it, or a dev tag the training file lacks, stops the run with `<file>:<line>: ...`. The
classes are the training file's tags (O first, then by type, B before I), recorded in the
workdir and the HF export's id2label (`python -m bert_jax.commands.convert --input=WORKDIR
--output=DIR --to=hf`).

Prints the training lines, then eval_f1 (seqeval's entity F1; eval_precision, eval_recall
and each type's eval_f1_TYPE in WORKDIR/eval_results.json); --config.predict=true writes
WORKDIR/predictions_tag.txt (`word gold predicted`). `train_examples=N` uses a random N
sentences; `runlocal=True` is a smoke test. Training batches are packed as configs/conll.py's
(`data.pack_each_batch`); the other settings are the fine-tuning defaults (configs/common.py).
"""
import os

from bert_jax.configs.common import finetuning_config, parse_arg, shrink_for_runlocal


def get_config(arg=None):
  arg = parse_arg(arg, train="", dev="", column=-1, train_examples=0, runlocal=False)
  for field in ("train", "dev"):
    if not arg[field]:
      raise ValueError(f"configs/tag.py: {field}= is required (e.g. "
                       "configs/tag.py:train=train.txt,dev=dev.txt)")
  sources = {split: os.path.abspath(arg[split]) for split in ("train", "dev")}
  config = finetuning_config("tag", sources, column=arg.column)
  config.data.train_examples = arg.train_examples
  config.data.pack_each_batch = True  # dynamic padding's losses, far fewer pad tokens
  return shrink_for_runlocal(config) if arg.runlocal else config
