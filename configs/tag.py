r"""Tagging your own CoNLL-format files, any IOB2 / IOB1 / IOBES tag set: each word's first
sub-token -> a tag.

  python -m bert_jax.train --workdir=runs/mytags \
      --config=configs/tag.py:train=train.txt,dev=dev.txt[,column=-1,scheme=iob2]
  python -m bert_jax.train --workdir=runs/mytags \
      --config=configs/tag.py:train=train.txt,dev=dev.txt,test=test.txt --config.predict=true

train, dev: one word per line, space-separated fields with the word first and the tag in
field `column` (0-based; -1, the default, is the last: `word tag`, or CoNLL-2003's `word POS
chunk NER`), a blank line between sentences (-DOCSTART- lines dropped). Their paths are
relative to the current directory (absolute allowed): your files, not the data root. test:
a file to predict, the word first on each line (a tag after it is not read). `scheme=`
names the tags' scheme: iob2 (the default; O, B-TYPE, I-TYPE, an I-TYPE continues its
B-TYPE), iob1 (an entity starts with I-TYPE; B-TYPE only right after another of its type)
or iobes (S-TYPE alone; B-TYPE I-TYPE... E-TYPE). A line without the tag field, a tag or
sequence the scheme forbids, or a dev tag the training file lacks stops the run with
`<file>:<line>: ...`; `skip_bad_rows=true` skips such sentences and prints each file's
count once. The classes are the training file's tags as written (O first, then by type),
recorded in the workdir and the HF export's id2label (`python -m bert_jax.commands.convert
--input=WORKDIR --output=DIR --to=hf`).

Prints the training lines, then eval_f1 (seqeval's entity F1, conlleval's chunks in every
scheme; eval_precision, eval_recall and each type's eval_f1_TYPE in
WORKDIR/eval_results.json); --config.predict=true writes WORKDIR/predictions_<test file's
name>.txt (`word predicted`, its sentences in order, a blank line between them), or without
test= WORKDIR/predictions_tag.txt (the dev file's `word gold predicted`).
`train_examples=N` uses a random N sentences; `runlocal=True` is a smoke test. Training batches are packed as configs/conll.py's
(`data.pack_each_batch`); the other settings are the fine-tuning defaults (configs/common.py).
"""
from bert_jax.configs.common import (finetuning_config, parse_arg, shrink_for_runlocal,
                                     user_file_sources)


def get_config(arg=None):
  arg = parse_arg(arg, train="", dev="", test="", column=-1, scheme="iob2",
                  skip_bad_rows=False, train_examples=0, runlocal=False)
  sources = user_file_sources(arg, "configs/tag.py", "train=train.txt,dev=dev.txt")
  config = finetuning_config("tag", sources, column=arg.column, scheme=arg.scheme,
                             skip_bad_rows=arg.skip_bad_rows,
                             predict_split="test")  # predicted with --config.predict=true
  config.data.train_examples = arg.train_examples
  config.data.pack_each_batch = True  # dynamic padding's losses, far fewer pad tokens
  return shrink_for_runlocal(config) if arg.runlocal else config
