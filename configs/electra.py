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

`size=small|base|large`: ELECTRA at the paper's scale (Clark et al. 2020, Table 6, as
google-research/electra's configure_pretraining.py sets it): the discriminator of that
size with a generator of 1/4 (Small, Large) or 1/3 (Base) of its width, loss mlm + 50 rtd,
BERT's uncased 30,522-piece vocabulary; Small at 128 tokens, batch 128, lr 5e-4, 1M steps;
Base at 512, batch 256, lr 2e-4, 766k steps; Large at 512, batch 2048, lr 2e-4, 400k steps,
25% masked; 10k warmup steps, weight decay 0.01. bf16 compute, fp32 params and Adam state,
no attention guidance:

  python -m bert_jax.train --config=configs/electra.py:size=base,corpus=/data/*.txt \
      --workdir=gs://bucket/electra_base

`tfds=NAME` reads a tfds dataset instead of `corpus`, `seq=N` another row length,
`runlocal=True` the same models for a smoke test (T64, batch 8, 20 steps).
Planned (not run) for a TPU v5p-8 by its own compiler on a CPU machine (`--compile_only
--target=tpu:v5p-8 --config.mesh.data=1 --config.mesh.fsdp=4
--config.model.attention_impl=splash --config.model.attention_probs_dropout_prob=0`, and
`--config.grad_accum_steps=8` for Large's 2,048 rows; 2026-12-01, 107da01, libtpu 0.0.42.1,
on a shared 2-core CPU): `size=base`'s 256 x 512 step (generator and discriminator) needs
16.59 GiB per chip of v5p's 95 (16.21 of it temporaries; the sharded fp32 params and Adam
state 0.34), 271 s of compile; `size=large`'s 2,048 x 512 as 8 micro-batches of 256 needs
33.59 GiB (32.57 temporaries, 0.99 params and Adam state), 439 s. A compiler estimate, not
a run.
"""
from bert_jax.pretrain import electra
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args,
                                     shrink_pretraining_for_runlocal, use_prepared_corpus)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", size="", tfds="", seq=0,
                  runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg)
  config = electra_config("electra-tiny")
  config.electra.generator_fraction = 0.25
  use_prepared_corpus(config, arg.corpus)
  config.data.max_seq_length = 64  # short rows: a few minutes on 2 shared cores
  # ELECTRA-Large's masking rate (the paper's Small and Base use 15%): at 15% no held-out
  # token crosses p = 0.5 (module docstring); 16 = 25% of 64.
  config.data.max_predictions_per_seq = 16
  config.data.masked_lm_prob = 0.25
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


def electra_config(size):
  """ELECTRA's task on a discriminator size: loss mlm + 50 rtd (configure_pretraining.py
  gen_weight 1.0, disc_weight 50.0), generator samples at temperature 1.0 (its
  temperature), contiguous-text rows with no NSP, masked 85/0/15 ([MASK] / random / kept)."""
  config = pretraining_config(size)
  config.task = "electra"
  config.objectives = "mlm:1,rtd:50"
  config.electra = electra.default_config()
  config.electra.temperature = 1.0
  config.data.example_builder = "full_sentences"
  config.data.mask_token_prob = 0.85
  config.data.random_token_prob = 0.0
  return config


def paper_config(arg):
  """configs/electra.py:size=small|base|large (module docstring)."""
  size, seq = RECIPE_SHAPES.get(arg.size, ("electra-small", 128))
  config = electra_config(size)
  # configure_pretraining.py: max_seq_length 128 (Small), 512 for the larger models.
  set_pretraining_data(config, recipe_data_arg(arg, seq=seq))
  # The default vocab_path, BERT's uncased vocab.txt: the README's "exact same vocabulary as
  # English uncased BERT" (vocab_size 30522, do_lower_case True in configure_pretraining.py).
  paper_scale(config, RECIPES, arg)
  if not arg.runlocal:  # configure_pretraining.py: int((mask_prob + 0.005) * max_seq_length)
    config.data.max_predictions_per_seq = int(
        (config.data.masked_lm_prob + 0.005) * config.data.max_seq_length)
  return config


def _common(config):
  """Every size's optimisation (configure_pretraining.py): linear warmup over 10,000 steps
  (num_warmup_steps), linear decay to 0 (lr_decay_power 1.0), weight decay 0.01."""
  config.optim.name = "adamw"
  config.optim.warmup_steps = 10_000
  config.optim.end_learning_rate = 0.0
  config.optim.weight_decay = 0.01
  config.data.masked_lm_prob = 0.15  # mask_prob 0.15 (Small, Base)


def _small(config):
  """ELECTRA-Small: configure_pretraining.py's defaults (model_size "small")."""
  _common(config)
  config.electra.generator_fraction = 0.25  # generator_hidden_size 0.25
  config.data.batch_size = 128  # train_batch_size 128
  config.optim.learning_rate = 5e-4  # learning_rate 5e-4
  config.num_train_steps = 1_000_000  # num_train_steps 1000000


def _base(config):
  """ELECTRA-Base: configure_pretraining.py's larger-model block (base)."""
  _common(config)
  config.electra.generator_fraction = 1 / 3  # generator_hidden_size 0.33333
  config.data.batch_size = 256  # train_batch_size 256
  config.optim.learning_rate = 2e-4  # learning_rate 2e-4
  config.num_train_steps = 766_000  # Table 6: 766K (restated, not in configure_pretraining.py)


def _large(config):
  """ELECTRA-Large: configure_pretraining.py's larger-model block (large)."""
  _common(config)
  config.electra.generator_fraction = 0.25  # generator_hidden_size stays 0.25
  config.data.masked_lm_prob = 0.25  # mask_prob 0.25
  config.data.batch_size = 2048  # train_batch_size 2048
  config.optim.learning_rate = 2e-4  # learning_rate 2e-4
  config.num_train_steps = 400_000  # ELECTRA-400K (Table 6; not read from a source here)


RECIPES = {"small": _small, "base": _base, "large": _large}
# size -> (the discriminator's named size, the paper's row length).
RECIPE_SHAPES = {"small": ("electra-small", 128), "base": ("electra-base", 512),
                 "large": ("electra-large", 512)}
