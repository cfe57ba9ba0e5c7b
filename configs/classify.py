r"""Fine-tuning on your own labelled files: one text or a pair -> a class, classes, or a number.

  python -m bert_jax.train --workdir=runs/mine \
      --config=configs/classify.py:train=train.csv,dev=dev.csv,text=sentence,label=label
  python -m bert_jax.train --workdir=runs/mine \
      --config=configs/classify.py:train=train.csv,dev=dev.csv,text=sentence,label=label,test=test.csv \
      --config.predict=true

train, dev, test: the files, CSV (as Python's csv module reads it: quoted fields), TSV (tabs
only) or JSON lines, by extension (.csv .tsv .jsonl/.json) or `format=csv|tsv|jsonl`. Their
paths are relative to the current directory (absolute allowed): these are your files, not
the data root. `text=` (and `text_pair=` for pairs) and `label=` name the columns (JSON
keys); `id=` the column the predictions keep (default: `id` where the file has it, else
each row's line number). A comma cannot be in an argument; --config.data.sources.train=PATH
takes any path. `dataset=tfds:NAME` (e.g. tfds:glue/sst2) reads a tfds dataset instead, and
`dataset=hf:NAME` a Hugging Face one (a folder `DatasetDict.save_to_disk` wrote, else a name
for `datasets.load_dataset`; needs the `datasets` package): then train=, dev=, test= name its
splits (default train, validation, none), text= and label= its features (a ClassLabel's
class names are the labels); predictions go to
WORKDIR/predictions_<split>.jsonl, keyed by `index` (the record's place in its split) or id=.
The labels are the training file's, sorted; `problem_type` is inferred
(finetune/classify_reader.py infer_problem): multi_label where the label is a JSON list or
`label_sep=|` splits a CSV/TSV field; regression where every training label is a number and
they take more than 10 distinct values; else single_label. `task=regression|single_label|
multi_label` forces it. Scores: accuracy and macro_f1 (single label), pearson and spearman
(regression), micro_f1 (multi-label, a class predicted where its logit > 0). A bad row
(missing column, empty text or label, a non-number in a regression, a dev label the
training file lacks) stops the run with `<file>:<line>: ...`; `skip_bad_rows=true` skips
such rows and prints each file's count once.

Prints the training lines, then `eval_accuracy`, `eval_macro_f1` (or the problem's scores);
writes WORKDIR/eval_results.json, model_config.json with the labels (the HF export's
id2label: `python -m bert_jax.commands.convert --input=WORKDIR --output=DIR --to=hf`) and, with
--config.predict=true, WORKDIR/predictions_<test file's name>.<its format> (the dev file's
without test=): `id` (or `line`) and `prediction` (a label name, a number, or the labels).
`train_examples=N` trains on a random N; `runlocal=True` is a smoke test (64 examples, T32,
one epoch). `--config.data.pack_each_batch=true` packs each batch's examples into fewer rows
(single label and regression; GLUE's speed-up on short texts). The other settings are the
fine-tuning defaults (configs/common.py): from all-MiniLM-L6-v2 when installed, 3 epochs,
batch 32, lr 5e-5, seq 128.

Measured from all-MiniLM-L6-v2 (2-core AMD EPYC shared with other jobs, 2026-12-01,
ac6b692): 2,000 random SST-2 training rows written as train.csv with the labels
negative/positive, SST-2's 872 dev rows as dev.csv, `--config.data.max_seq_length=64
--config.num_train_epochs=1 --config.optim.learning_rate=1e-4`: 62 steps in 7.1 min (75 s of
it compiling), eval_accuracy 0.8050, eval_macro_f1 0.8050.
"""
from bert_jax.files import storage
from bert_jax.configs.common import finetuning_config, parse_arg, shrink_for_runlocal


def get_config(arg=None):
  arg = parse_arg(arg, train="", dev="", test="", dataset="", text="", text_pair="", label="",
                  id="", format="", task="", label_sep="", skip_bad_rows=False,
                  train_examples=0, runlocal=False)
  for field in ("text", "label") if arg.dataset else ("train", "dev", "text", "label"):
    if not arg[field]:
      raise ValueError(f"configs/classify.py: {field}= is required (e.g. "
                       "configs/classify.py:train=train.csv,dev=dev.csv,text=sentence,label=label)")
  if arg.dataset:  # train=, dev=, test= name its splits
    if not arg.dataset.startswith(("tfds:", "hf:")):
      raise ValueError(f"configs/classify.py: dataset={arg.dataset!r}: expected tfds:NAME or "
                       "hf:NAME (e.g. dataset=tfds:glue/sst2, dataset=hf:path/to/saved)")
    splits = {"train": arg.train or "train", "dev": arg.dev or "validation", "test": arg.test}
    sources = {split: arg.dataset if name else "" for split, name in splits.items()}
  else:
    splits = {}
    sources = {split: storage.absolute(arg[split]) if arg[split] else ""
               for split in ("train", "dev", "test")}
  config = finetuning_config("classify", sources, text=arg.text, text_pair=arg.text_pair,
                             label=arg.label, id=arg.id, format=arg.format,
                             problem_type=arg.task, label_sep=arg.label_sep,
                             skip_bad_rows=arg.skip_bad_rows, dataset_splits=splits,
                             predict_split="test")  # predicted with --config.predict=true
  config.data.train_examples = arg.train_examples
  return shrink_for_runlocal(config) if arg.runlocal else config
