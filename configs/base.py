r"""BERT-Base (L12/H768/A12, 110M) pretraining, the recipe of Devlin et al. (2019).

  python -m bert_jax.train --config=configs/base.py:corpus=/data/wiki_books/*.txt \
      --workdir=gs://bucket/bert_base
  python -m bert_jax.train --config=configs/base.py:tfds=wikipedia/20230601.en --workdir=...

Phase 1 of the paper: 900k steps at seq 128 (batch 256, lr 1e-4, warmup 10k), then
100k at seq 512 (`seq=512`); the paper's run took 4 days on 16 TPU chips. On a CPU use
configs/tiny.py. `runlocal=True` shrinks it to a smoke test (seconds per step on CPU).

Planned (not run) for a TPU v5e-16 by its own compiler on a CPU machine (`--compile_only
--target=tpu:v5e-16 --config.mesh.fsdp=16`, splash attention, bf16 compute; 2026-11-28,
f32b1c4, docs/results/scaling.md): 1.38 GiB per chip at seq 128 and 4.39 GiB at 512 of
its 16, a memory-bound step of >= 25 ms / 81 ms (at most ~83k / ~101k tokens/s per chip):
phase 1's 900k steps no faster than 6.3 hours there, a bound, not a measurement.
"""
import os

from bert_jax.configs.common import parse_arg, pretraining_config


def get_config(arg=None):
  arg = parse_arg(arg, corpus="", tfds="", seq=128, runlocal=False)
  config = pretraining_config("base")
  set_pretraining_data(config, arg)
  config.optim.learning_rate = 1e-4
  config.optim.warmup_steps = 10_000
  config.num_train_steps = 1_000_000
  if arg.runlocal:
    config.data.batch_size = 8
    config.data.max_seq_length = 64
    config.num_train_steps = 10
    config.log_every_steps = 1
    config.eval_every_steps = 0
    config.checkpoint_every_steps = 10
  return config


def set_pretraining_data(config, arg):
  """Corpus files (plain format, see bert_jax.text.prepare) or a tfds dataset."""
  if arg.corpus:  # ';'-separated globs; local paths are taken from the working directory
    config.data.train_files = tuple(p if "://" in p else os.path.abspath(p)
                                    for p in arg.corpus.split(";"))
  elif arg.tfds:
    config.data.tfds_name = arg.tfds
    config.data.tfds_text_field = "text"
  else:
    config.data.train_files = (os.path.abspath("runs/corpus/pretrain.txt"),)
  config.data.eval_held_out_docs = 1000
  config.data.max_seq_length = arg.seq
  config.data.max_predictions_per_seq = 20 if arg.seq <= 128 else 80
  config.data.batch_size = 256
