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
"""
from bert_jax.files import storage
from bert_jax.pretrain import distillation
from bert_jax.configs.common import (parse_arg, pretraining_config,
                                     shrink_pretraining_for_runlocal, use_prepared_corpus)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", teacher="runs/tiny", runlocal=False)
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
