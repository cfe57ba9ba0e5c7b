r"""Reformer-Tiny (L2/H128/A2 x 64, local + LSH layers, reversible) pretraining on the
prepared real corpus, on 2 CPU cores: MLM only, full rows of sentences, a SentencePiece
vocabulary learned here (Kitaev et al. 2020, "Reformer: The Efficient Transformer").

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt              # once
  python -m bert_jax.text.learn_vocab --kind=sentencepiece \
      --input=runs/corpus/pretrain.txt --vocab_size=8192 --output=runs/corpus/spm-8k  # once
  python -m bert_jax.train --config=configs/reformer.py --workdir=runs/reformer

Arg (`configs/reformer.py:corpus=PATH,vocab=FOLDER,vocab_size=N,runlocal=True`): the
prepared file, the SentencePiece folder (spiece.model) and its piece count; `runlocal`
shrinks everything for a smoke test (seconds).

What differs from configs/tiny.py (BERT): the reformer family ("reformer-tiny",
models/reformer.py): axial position embeddings (16 x 32), layer 0 local attention in chunks
of 32 tokens (each seeing the chunk before), layer 1 LSH attention (2 hash rounds, chunks of
32, buckets chosen from the length as HF does), reversible layers, ReLU feed-forward, a
2H-wide output read by an untied linear MLM head; no NSP (objectives=mlm, full_sentences
rows); no attention guidance (Reformer's attention has no probabilities to pull); its
tokenizer kind, SentencePiece (as google/reformer-crime-and-punishment's).

Measured (the three commands above, defaults: 1,500 steps of 32 x 128 tokens, 6,144,000
tokens; 2-core AMD EPYC, 2026-11-29, 44fb3b9): 16 min 56 s wall (1,000 s of training,
6,000-7,400 tokens/s); held-out MLM accuracy 0.0478 / 0.0563 / 0.0662 at steps 500 / 1,000 /
1,500, held-out MLM loss 6.66 at the end (training 6.40). Slow to leave the frequent pieces
at this size and budget: an accuracy, not yet a language model.

`size=enwik8`: the paper's long-context model (Kitaev et al. 2020, Sec. 5, enwik8 at 64K
tokens; google/trax's reformer_enwik8.gin and HF google/reformer-enwik8's config.json) as
this codebase's masked LM: 12 reversible layers of H1024, 8 heads of 128, ReLU I4096,
local attention in chunks of 128 with LSH attention (4 hash rounds, 512 buckets, chunks
of 256) at layers 2, 6 and 10, axial positions 128 x 512 (dims 256 + 768) for 65,536
tokens, dropout 0.2 (LSH's 0.1); rows of 65,536 tokens, one per device on 8 devices
(batch_size_per_device 1), 100,000 steps, Adam b2 0.98, eps 1e-9, no weight decay, 2,000
warmup steps to d_model^-0.5 x 2000^-0.5 = 7e-4. What differs: the paper's is a causal
byte-level LM (258 symbols) with an rsqrt decay; here MLM (15%, 80/10/10) over a
SentencePiece vocabulary (`vocab_size=258` by default, the paper's symbol count) with a
linear decay, the schedules this codebase has. bf16 compute, fp32 params and Adam state.
Two memory settings (the same outputs) let a 65,536-token row train on a 16 GiB chip: the
feed-forward 4,096 tokens at a time and LSH attention's sorted chunks in 16 groups
(`chunk_size_feed_forward`, `lsh_attention_groups`); compiled for a v5e-8, one row a chip,
the step's peak is 14.74 GiB with both, 23.90 without (bench/target_plan.py --recipes
--rows=reformer --targets=tpu:v5e-8, docs/results/scaling.md). Compiled for 8 H100s the
feed-forward chunks cost memory instead (44.22 GiB, 31.05 with the groups alone): add
--config.model.chunk_size_feed_forward=0 on GPUs.

  python -m bert_jax.train --config=configs/reformer.py:size=enwik8,corpus=/data/enwik8.txt \
      --workdir=gs://bucket/reformer_enwik8

`vocab` is a SentencePiece folder (spiece.model); `tfds=NAME` reads a tfds dataset instead
of `corpus`, `seq=N` another row length (a multiple of 256 up to 65,536), `runlocal=True`
the same model for a smoke test (T64, batch 8, 20 steps).
"""
import math

from bert_jax.files import storage
from bert_jax.models.config import config_for_size
from bert_jax.configs import tiny
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="", vocab_size=0, size="",
                  tfds="", seq=0, runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "reformer-tiny", vocab_size=arg.vocab_size or 8192).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/spm-8k")
  config.data.example_builder = "full_sentences"
  config.objectives = "mlm"
  config.attention_guidance.weight = 0.0
  return config


def paper_config(arg):
  """configs/reformer.py:size=enwik8 (module docstring); each value's source beside it."""
  seq = arg.seq or 65536  # the row length: seq=N, else the paper's
  # google/reformer-enwik8 config.json (HF), trax reformer_enwik8.gin's "if more memory"
  # widths: d_model 1024, d_ff 4096, 8 heads, attention_head_size 128, 12 layers.
  config = pretraining_config(
      "reformer-default", num_hidden_layers=12, hidden_size=1024, num_attention_heads=8,
      attention_head_size=128, intermediate_size=4096,
      attn_layers=("local", "local", "lsh", "local") * 3,  # attn_layers
      local_attn_chunk_length=128, lsh_attn_chunk_length=256,  # chunk lengths 128 / 256
      num_hashes=4, num_buckets=512,  # num_hashes 4, num_buckets 512
      max_position_embeddings=65536, axial_pos_shape=(128, 512),  # 128 x 512 = 65,536
      axial_pos_embds_dim=(256, 768),  # axial_pos_embds_dim [256, 768]
      hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2,  # dropout 0.2
      lsh_attention_probs_dropout_prob=0.1,  # lsh_attention_probs_dropout_prob 0.1
      layer_norm_eps=1e-12, vocab_size=arg.vocab_size or 258,  # 258 byte symbols
      # Memory settings, not the paper's (the same outputs): the feed-forward 4,096 tokens
      # at a time, LSH attention's 4 x 65,536 / 256 sorted chunks in 16 groups.
      chunk_size_feed_forward=math.gcd(4096, seq),
      lsh_attention_groups=math.gcd(16, 4 * seq // 256))
  set_pretraining_data(config, recipe_data_arg(arg, seq=65536))  # max_len 65536
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/spm-enwik8")
  config.data.example_builder = "full_sentences"
  config.objectives = "mlm"
  paper_scale(config, RECIPES, arg)
  if not arg.runlocal:  # 15% of the row
    config.data.max_predictions_per_seq = round(0.15 * config.data.max_seq_length)
  return config


def _enwik8(config):
  """reformer_enwik8.gin's training: 8 devices x batch_size_per_device 1, 100k steps,
  Adam (b1 0.9, b2 0.98, eps 1e-9, weight_decay_rate 0), warmup 2,000 steps to 7e-4."""
  config.data.batch_size = 8  # batch_size_per_device 1 on 8 devices (Sec. 5)
  config.num_train_steps = 100_000  # train.steps 100000
  config.optim.name = "adamw"
  config.optim.learning_rate = 7e-4  # multifactor constant 0.03125 x 2000^-0.5
  config.optim.warmup_steps = 2_000  # multifactor.warmup_steps 2000
  config.optim.end_learning_rate = 0.0
  config.optim.b2 = 0.98  # Adam.b2 0.98
  config.optim.eps = 1e-9  # Adam.eps 1e-9
  config.optim.weight_decay = 0.0  # Adam.weight_decay_rate 0.0
  config.optim.grad_clip_norm = 0.0  # the gin sets no gradient clipping


RECIPES = {"enwik8": _enwik8}
