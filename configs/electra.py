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

Measured at step 100 (the warmup's end; the first 10 held-out batches of a run with
--config.num_train_steps=600 --config.eval_every_steps=100 --config.eval_batches=10;
shared machine):
held-out discriminator accuracy 0.788 against the all-original baseline 0.760
(recall 0.637, precision 0.551), generator MLM accuracy 0.002. It wins while the generator
is still worse than the unigram distribution (its samples are rare words); at 15% masking
no token crossed p = 0.5 (AUC 0.849 at step 100, accuracy = baseline), and once the
generator nears the unigram (~step 200) the gap closes at either rate: at 25%, held-out
0.761 vs 0.761 at step 200, generator MLM accuracy 0.049 (README, Results).
"""
from bert_jax.pretrain import electra
from configs.common import (parse_arg, pretraining_config, shrink_pretraining_for_runlocal,
                            use_prepared_corpus)


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
  config.num_train_steps = 300
  config.log_every_steps = 50
  config.eval_every_steps = 0
  config.eval_batches = 0  # every held-out batch
  config.checkpoint_every_steps = 100
  if arg.runlocal:
    shrink_pretraining_for_runlocal(config)
  return config
