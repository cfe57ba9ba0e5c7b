r"""BERT-Large (L24/H1024/A16, 340M) pretraining, the recipe of Devlin et al. (2019).

  python -m bert_jax.train --config=configs/large.py:corpus=/data/wiki_books/*.txt \
      --workdir=gs://bucket/bert_large --config.mesh.fsdp=8

Same schedule as base (batch 256, lr 1e-4, 10k warmup, 1M steps) with layers scanned and
rematerialised: "dots" at seq 128 (6.5 GiB/device at fsdp=8, batch 256), "full" at seq 512
("dots" keeps the [B, N, T, T] attention scores: 34.9 GiB at batch 256; "full" needs 8.3
GiB). Numbers from `python bench/memory_table.py` (XLA CPU compiler, 8 simulated devices).
The TPU's own compiler plans less (`--compile_only --target=tpu:v5e-16
--config.mesh.fsdp=16`, splash, bf16 compute, no remat, layers unscanned; 2026-11-28,
f32b1c4, docs/results/scaling.md): 3.61 GiB per v5e chip at seq 128 and 11.52 GiB at 512
of its 16, steps of >= 72 ms / 211 ms. On a v6e-8 the seq-512 recipe (fsdp=8, 32 rows a
chip, layers unrolled) plans 23.67 GiB a chip of its 32 against 4.52 on a v5e-8; with
`LIBTPU_INIT_ARGS=--xla_tpu_enable_latency_hiding_scheduler=false` 13.50 (compiler facts,
2026-12-03, ed7d4e7; scaling.md, "The v6e compiler's memory"). `runlocal=True` for a smoke
test.
"""
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import parse_arg, pretraining_config


def get_config(arg=None):
  arg = parse_arg(arg, corpus="", tfds="", seq=128, runlocal=False)
  config = pretraining_config("large", scan_layers=True,
                              remat_policy="dots" if arg.seq <= 128 else "full")
  set_pretraining_data(config, arg)
  config.optim.learning_rate = 1e-4
  config.optim.warmup_steps = 10_000
  config.num_train_steps = 1_000_000
  if arg.runlocal:
    config.data.batch_size = 4
    config.data.max_seq_length = 32
    config.num_train_steps = 4
    config.log_every_steps = 1
    config.eval_every_steps = 0
    config.checkpoint_every_steps = 4
  return config
