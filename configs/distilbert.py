r"""DistilBERT-style distillation (Sanh et al. 2019) of a tiny BERT into a smaller student,
on the real text of ../shared/data, on 2 CPU cores.

Recipe: pretrain the teacher (configs/tiny.py, BERT-Tiny L2/H128), then distil it into a
one-layer DistilBERT-family student (no segments, no pooler) started from the teacher's
layer 0 ("every other layer"), its embeddings and MLM head:

  python -m bert_jax.train --config=configs/tiny.py --workdir=runs/tiny \
      --config.num_train_steps=500
  python -m bert_jax.train --config=configs/distilbert.py:teacher=runs/tiny \
      --workdir=runs/distilbert

Loss = 5 distill (soft targets at T=2 on the masked positions) + 2 mlm + 1 cosine (last
hidden states), DistilBERT's alpha_ce / alpha_mlm / alpha_cos (bert_jax/pretrain/
distillation.py); each term is logged apart. Examples are RoBERTa's FULL-SENTENCES (MLM
only, no NSP). The same student without a teacher (the baseline distillation must beat):
`--config.objectives=mlm --config.distillation.student_layers=` (no teacher is read).
Attention guidance (configs/tiny.py's: layer 0, previous/next token) is on in both.

Arg (`configs/distilbert.py:teacher=PATH,corpus=PATH,runlocal=True`): `teacher` is any HF
folder or bert_jax workdir with an MLM head and the student's vocabulary; `runlocal`
shrinks everything for a smoke test (seconds).

Measured (300 steps, 2 shared cores, ~12 min; teacher at 500 steps, held-out MLM 0.141):
held-out MLM accuracy 0.155 distilled, 0.092 for the same student without a teacher, 0.157
started from the teacher's layer with MLM only (README, Results).

`size=base`: DistilBERT at the paper's scale (Sanh et al. 2019, Sec. 3-4, as HF's
examples/research_projects/distillation train.py and README run it): a 6-layer H768
student (no segments, no pooler) started from the BERT-base-uncased teacher's layers 0, 2,
4, 7, 9, 11 (scripts/extract_distilbert.py), loss 5 distill (T=2) + 2 mlm + 1 cosine
(alpha_ce 5.0, alpha_mlm 2.0, alpha_cos 1.0), dynamic masking of 15% (80/10/10), no NSP,
batches of 4,096 rows of up to 512 tokens (Sec. 4: "up to 4K examples per batch"; train.py
gets there by gradient accumulation), Adam at lr 5e-4 with eps 1e-6, no weight decay,
warmup over 5% of the steps, gradient clipping at 5.0; bf16 compute, fp32 params and Adam
state, no attention guidance. Steps: the paper trains 90 hours on 8 V100s, train.py 3
epochs (n_epoch 3) of BERT's corpus; 3 x ~3.3B words at ~1.3 pieces a word in 512-token
rows of 4,096 is ~6,100 steps, an estimate (neither source gives steps):

  python -m bert_jax.train --workdir=gs://bucket/distilbert \
      --config=configs/distilbert.py:size=base,teacher=/models/bert-base-uncased,corpus=/data/*.txt

`teacher` is the BERT-base MLM checkpoint (an HF folder such as bert-base-uncased, a TF
checkpoint or a bert_jax workdir, its vocabulary the student's); `tfds=NAME` reads a tfds
dataset instead of `corpus`, `seq=N` another row length, `runlocal=True` the same models
for a smoke test (T64, batch 8, 20 steps).
"""
from bert_jax.files import storage
from bert_jax.pretrain import distillation
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args,
                                     shrink_pretraining_for_runlocal, use_prepared_corpus)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", teacher="", size="", tfds="", seq=0,
                  runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg)
  arg.teacher = arg.teacher or "runs/tiny"
  config = pretraining_config("distilbert-tiny", num_hidden_layers=1)
  config.objectives = "distill:5,mlm:2,cosine:1"
  config.distillation = distillation.default_config()
  config.distillation.teacher = storage.absolute(arg.teacher)
  config.distillation.student_layers = "0"
  config.distillation.temperature = 2.0
  config.data.example_builder = "full_sentences"
  use_prepared_corpus(config, arg.corpus)
  config.data.max_seq_length = 64  # short rows: a few minutes on 2 shared cores
  config.data.max_predictions_per_seq = 10
  config.optim.learning_rate = 1e-3
  config.optim.warmup_steps = 50
  config.num_train_steps = 300
  config.log_every_steps = 50
  config.eval_every_steps = 0
  config.eval_batches = 0  # every held-out batch
  config.attention_guidance.weight = 1.0
  config.attention_guidance.patterns = "previous,next"
  config.attention_guidance.layers = "0"
  config.checkpoint_every_steps = 100
  if arg.runlocal:
    shrink_pretraining_for_runlocal(config)
  return config


def paper_config(arg):
  """configs/distilbert.py:size=base (module docstring); each value's source beside it."""
  # HF training_configs/distilbert-base-uncased.json: 6 layers, dim 768, 12 heads, 3072.
  config = pretraining_config("distilbert-base-uncased")
  config.objectives = "distill:5,mlm:2,cosine:1"  # alpha_ce 5.0, alpha_mlm 2.0, alpha_cos 1.0
  config.distillation = distillation.default_config()
  config.distillation.teacher = storage.absolute(arg.teacher or "runs/bert_base")
  config.distillation.student_layers = "0,2,4,7,9,11"  # extract_distilbert.py's layers
  config.distillation.temperature = 2.0  # temperature 2.0
  config.data.example_builder = "full_sentences"  # Sec. 3: no NSP, no token types
  set_pretraining_data(config, recipe_data_arg(arg, seq=512))  # max_model_input_size 512
  paper_scale(config, RECIPES, arg)
  return config


def _distilbert_base(config):
  """train.py's flags as the README's command runs them, and the paper's batch."""
  config.data.batch_size = 4096  # Sec. 4: up to 4K examples per batch
  config.data.max_predictions_per_seq = 80  # mlm_mask_prop 0.15 of 512 (77), as base.py
  config.data.masked_lm_prob = 0.15  # mlm_mask_prop 0.15; word_mask / keep / rand 0.8 / 0.1 / 0.1
  config.num_train_steps = 6_100  # an estimate of 3 epochs (module docstring)
  config.optim.name = "adamw"
  config.optim.learning_rate = 5e-4  # learning_rate 5e-4
  config.optim.warmup_steps = 0
  config.optim.warmup_fraction = 0.05  # warmup_prop 0.05, then linear decay
  config.optim.end_learning_rate = 0.0
  config.optim.b2 = 0.999  # torch AdamW's default betas
  config.optim.eps = 1e-6  # adam_epsilon 1e-6
  config.optim.weight_decay = 0.0  # weight_decay 0.0
  config.optim.grad_clip_norm = 5.0  # max_grad_norm 5.0
  config.model.hidden_dropout_prob = 0.1  # distilbert-base-uncased.json dropout 0.1
  config.model.attention_probs_dropout_prob = 0.1  # attention_dropout 0.1


RECIPES = {"base": _distilbert_base}
