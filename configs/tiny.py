r"""BERT-Tiny (L2/H128/A2) pretraining on the real text of ../shared/data, on 2 CPU cores.

Prepare the corpus once, then train (the README's main command does both):

  python -m bert_jax.data.prepare --output=runs/corpus/pretrain.txt \
      --source=nltk_corpora/gutenberg.zip --source=wikitext-2/valid.txt ...
  python -m bert_jax.train --config=configs/tiny.py --workdir=runs/tiny

Arg (`configs/tiny.py:corpus=PATH,runlocal=True`): `corpus` is the prepared file;
`runlocal` shrinks everything further for a smoke test (seconds).

Measured (shared 2-core CPU, ~0.5-1 s/step): MLM loss falls from 10.3 (= ln 30522) to
~6.5 within 300 steps; held-out MLM accuracy 11.9% and NSP accuracy 55% at step 800
(lr 2e-3). The run is 1,500 steps (~15-25 minutes on this machine).
"""
import os

from configs.common import parse_arg, pretraining_config


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", runlocal=False)
  config = pretraining_config("tiny")
  config.data.train_files = (os.path.abspath(arg.corpus),)
  config.data.eval_held_out_docs = 20
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.data.batch_size = 32
  config.data.cache_dir = os.path.abspath("runs/cache")
  config.optim.learning_rate = 2e-3  # 2e-3 left the unigram plateau sooner than 1e-3
  config.optim.warmup_steps = 100
  config.num_train_steps = 1500
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.eval_batches = 10
  config.checkpoint_every_steps = 500
  if arg.runlocal:
    config.data.max_seq_length = 64
    config.data.max_predictions_per_seq = 10
    config.data.batch_size = 8
    config.data.eval_held_out_docs = 4
    config.num_train_steps = 20
    config.optim.warmup_steps = 5
    config.log_every_steps = 5
    config.eval_every_steps = 10
    config.eval_batches = 2
    config.checkpoint_every_steps = 10
  return config
