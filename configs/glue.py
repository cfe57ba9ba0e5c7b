r"""GLUE fine-tuning (any of the nine tasks), by default from all-MiniLM-L6-v2.

  python -m bert_jax.train --config=configs/glue.py:dataset=sst2 --workdir=runs/sst2 \
      [--config.init_from=PATH] [--config.data.sources.train=glue/SST-2/train.tsv]

dataset: the GLUE dataset (config.data.dataset), one of cola sst2 mrpc stsb qqp mnli qnli
rte wnli (the task is "glue"; `task=` is the old spelling, refused). Sources default to the GLUE files
under the data root (mnli evaluates dev_matched; dev_mismatched via
--config.data.eval_split=dev_mismatched); "tfds:glue/<name>" reads tfds instead.
`train_examples=N` trains on the first N examples of a shuffled copy (quick runs);
`heldout=0.1` evaluates on a random 10% of the train rows instead of dev (MRPC and RTE,
whose dev files are not in ../shared/data; the train split then skips those rows; SST-2
holds back whole sentences with their phrases and scores the sentences, as its dev set);
`runlocal=True` is a smoke test. `--config.data.prompt_template="it was {mask} ."
--config.data.prompt_verbalizer=terrible,great` fine-tunes through the MLM head at the
template's mask instead of a new classifier (prompt-based fine-tuning). Writes
WORKDIR/eval_results.json (+ predictions_<dataset>.tsv with --config.predict=true). Each
training batch's examples are packed into as few rows as fit (`data.pack_each_batch`, the
losses of dynamic padding); `--config.data.pack_each_batch=false` trains on padded rows.

BERT's recipe: 3 epochs, batch 32, lr in {2,3,5}e-5, 10% warmup, seq 128.

Measured from all-MiniLM-L6-v2 (2-core AMD EPYC shared with other jobs, 2026-11-22 to
2026-11-24, a7ca5d3; docs/results/finetuning.md has every dataset): `dataset=sst2,
train_examples=32000 --config.data.max_seq_length=64 --config.num_train_epochs=1
--config.optim.learning_rate=1e-4`: 1,000 steps in 34.1 min, dev accuracy 88.88;
`dataset=stsb --config.optim.learning_rate=1e-4`: 537 steps in 34.5 min, dev Pearson 86.30.
"""
from bert_jax.finetune import glue_reader
from bert_jax.configs.common import finetuning_config, parse_arg, shrink_for_runlocal


def get_config(arg=None):
  arg = parse_arg(arg, dataset="sst2", train_examples=0, heldout=0.0, runlocal=False)
  dataset = glue_reader.get_dataset(arg.dataset)
  eval_split = dataset.dev_split
  sources = dict(dataset.files)  # every split the table knows, so each can be pointed elsewhere
  config = finetuning_config(
      "glue", sources,
      dataset=arg.dataset,  # the GLUE task (glue_reader.DATASETS): its files, labels, metric
      heldout_fraction=arg.heldout,  # > 0: this seeded share of train scored instead of dev
      heldout_seed=0)  # the seed that draws heldout_fraction's rows
  if arg.heldout:
    eval_split = "heldout"
  config.data.train_examples = arg.train_examples
  config.data.eval_split = eval_split
  # Each batch's examples packed into as few full rows as fit: dynamic padding's losses
  # (tests/test_packing.py) at ~3x its examples/s (README, Speed); false = padded rows.
  config.data.pack_each_batch = True
  # Prompt-based fine-tuning (PET / LM-BFF; headed.BertForPromptClassification): the
  # second segment is this template ("it was {mask} ." for a single sentence, "{mask} ,
  # {b}" for a pair) and the classes are the MLM head's logits at the mask for the
  # verbalizer's words, one per label in order ("terrible,great" for SST-2). "" = off.
  config.data.prompt_template = ""
  config.data.prompt_verbalizer = ""  # the verbalizer's words, one per label ("" = off)
  return shrink_for_runlocal(config) if arg.runlocal else config
