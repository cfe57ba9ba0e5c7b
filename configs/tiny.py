r"""BERT-Tiny (L2/H128/A2) pretraining on the real text of ../shared/data, on 2 CPU cores.

Prepare the corpus once, then train (the README's main command does both):

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt \
      --source=nltk_corpora/gutenberg.zip --source=wikitext-2/valid.txt ...
  python -m bert_jax.train --config=configs/tiny.py --workdir=runs/tiny

Arg (`configs/tiny.py:corpus=PATH,vocab=PATH,runlocal=True`): `corpus` is the prepared
file; `vocab` a vocabulary learned from it (`python -m bert_jax.text.learn_vocab`; the
model's vocab_size becomes its size), "" for BERT's released 30,522 pieces; `runlocal`
shrinks everything further for a smoke test (seconds).

Attention guidance is on (bert_jax/pretrain/attention_guidance.py): in layer 0, head 0 is
pulled to the previous token and head 1 to the next. Without it this model spends the
whole run on the unigram plateau (held-out MLM accuracy 12.5% at 1,500 steps, still
12.7% at 5,000; [MASK] positions at the most frequent piece's 4%); with it the plateau
ends within ~300 steps. `--config.attention_guidance.weight=0` is plain BERT.

Measured (2-core CPU, 9,500-12,000 tokens/s, 1,500 steps in 8-11 minutes): MLM loss 10.3
(= ln 30522) -> 5.6; held-out MLM accuracy 0.161 / 0.193 / 0.204 at steps 500 / 1,000 /
1,500 (0.170 at corrupted positions), held-out NSP accuracy 0.56 (training NSP ~0.70).
Layer 1 is left unguided: guiding both layers (both heads of each) gave the same MLM
accuracy but NSP stayed at chance, as [CLS] could no longer look past its neighbours.
"""
from bert_jax.configs.common import (parse_arg, pretraining_config,
                                     shrink_pretraining_for_runlocal, use_prepared_corpus,
                                     use_vocab)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="", runlocal=False)
  config = pretraining_config("tiny")
  use_prepared_corpus(config, arg.corpus)
  use_vocab(config, arg.vocab)
  config.optim.learning_rate = 2e-3  # 2e-3 left the unigram plateau sooner than 1e-3
  config.optim.warmup_steps = 100
  config.num_train_steps = 1500
  config.log_every_steps = 50
  config.eval_every_steps = 500
  config.eval_batches = 0  # every held-out batch (~25)
  config.attention_guidance.weight = 1.0
  config.attention_guidance.patterns = "previous,next"
  config.attention_guidance.layers = "0"
  config.checkpoint_every_steps = 500
  if arg.runlocal:
    shrink_pretraining_for_runlocal(config)
  return config
