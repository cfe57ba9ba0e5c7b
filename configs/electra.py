r"""ELECTRA (Clark et al. 2020) pretraining from scratch: a tiny generator + discriminator
on the real text of ../shared/data, on 2 CPU cores.

  python -m bert_jax.train --config=configs/electra.py --workdir=runs/electra

The discriminator is "electra-tiny" (L2/H128, embeddings E64 projected to H); the generator
has 1/4 of its width (H32, one head; config.electra.generator_fraction) and shares its
embedding tables. The generator learns MLM on 25% of the tokens (ELECTRA-Large's rate;
Small and Base use 15%), masked 85/0/15 ([MASK] / random / kept, ELECTRA's split); its
samples (softmax at config.electra.temperature, no gradient through them) replace the
masked tokens; the discriminator tells which tokens were replaced. Loss = mlm + 50 rtd
(config.objectives). Examples are contiguous text (FULL-SENTENCES, one segment stream, no
NSP). Attention guidance (configs/tiny.py's: layer 0, previous/next token) is on for the
discriminator, at weight 50 like its loss.

Logged: mlm_loss/accuracy (the generator), rtd_loss, rtd_accuracy, rtd_baseline_accuracy
(the share of real tokens not replaced: what "all original" scores), rtd_replaced_accuracy
(recall on the replaced tokens), rtd_precision, rtd_replaced_prob / rtd_original_prob.

Arg (`configs/electra.py:corpus=PATH,runlocal=True`): `runlocal` shrinks everything for a
smoke test (seconds).

Measured (a quiet machine, `--config.eval_every_steps=250 --config.eval_batches=10`, the
default 1,500 steps, 13.6 minutes; held-out discriminator accuracy vs the all-original
baseline): 0.7620 vs 0.7620 at step 250 (the generator near the unigram: its samples are
frequent words, and the discriminator answers the prior), 0.7631 vs 0.7631 at 500, 0.7705 vs
0.7678 at 750 (precision 0.84), 0.7776 vs 0.7743 at 1,000, 0.7842 vs 0.7774 at 1,250; at
1,500 on every held-out batch 0.7850 vs 0.7784 (recall 0.084, precision 0.608, rtd loss 0.472
vs the prior's 0.53), generator MLM accuracy 0.142. Before step ~200 it also wins briefly
(0.788 vs 0.760 at step 100, while the generator's samples are rare words): the earlier
300-step runs stopped in the gap between the two.
"""
from bert_jax.pretrain import electra
from bert_jax.configs.common import (parse_arg, pretraining_config,
                                     shrink_pretraining_for_runlocal, use_prepared_corpus)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", runlocal=False)
  config = pretraining_config("electra-tiny")
  config.task = "electra"
  config.objectives = "mlm:1,rtd:50"
  config.electra = electra.default_config()
  config.electra.generator_fraction = 0.25
  config.electra.temperature = 1.0
  use_prepared_corpus(config, arg.corpus)
  config.data.max_seq_length = 64  # short rows: a few minutes on 2 shared cores
  # ELECTRA-Large's masking rate (the paper's Small and Base use 15%): at 15% no held-out
  # token crosses p = 0.5 (module docstring); 16 = 25% of 64.
  config.data.max_predictions_per_seq = 16
  config.data.example_builder = "full_sentences"
  config.data.masked_lm_prob = 0.25
  config.data.mask_token_prob = 0.85
  config.data.random_token_prob = 0.0
  config.optim.learning_rate = 2e-3
  config.optim.warmup_steps = 100
  # configs/tiny.py's guidance on the discriminator's layer 0, at weight 50 as the
  # discriminator's loss is weighted 50 (at 1 the guidance loss stayed ~3.7 for 150 steps).
  config.attention_guidance.weight = 50.0
  config.attention_guidance.patterns = "previous,next"
  config.attention_guidance.layers = "0"
  config.num_train_steps = 1500  # the discriminator beats the baseline from ~750 (above)
  config.log_every_steps = 50
  config.eval_every_steps = 0
  config.eval_batches = 0  # every held-out batch
  config.checkpoint_every_steps = 500
  if arg.runlocal:
    shrink_pretraining_for_runlocal(config)
  return config
