r"""Compiled memory of a Reformer training step: reversible vs plain layers, and Reformer
vs BERT-style full attention of the same width, from compilation alone (nothing runs).

  python bench/reformer_memory.py --what=reversible --layers=12 --length=4096
  python bench/reformer_memory.py --what=length --lengths=1024,4096,16384

`reversible`: the gradient of the MLM loss through L local-attention layers, compiled with
reversible=True and False; prints both temporaries (activation memory) and their ratio.
`length`: the same step for reformer-tiny's width (H 128, 2 heads of 64, local + LSH
layers) and for a BERT of that width (full attention), at each length, batch 1.
Memory is XLA's `memory_analysis()` of the compiled step for the default backend.

Measured on the CPU backend (jax 0.10.2, 2026-11-28, at commit b0b8264 + this script):
  --what=reversible --layers=12 --length=2048: temporaries 59.8 MiB reversible against
    325.6 MiB plain, a ratio of 0.184 (--layers=4 --length=1024: 22.3 / 58.4 MiB, 0.382).
  --what=length --lengths=1024,4096,16384 (2 layers, H 128, batch 1):
    | tokens | Reformer (local + LSH) | BERT full attention |
    |---:|---:|---:|
    | 1,024 | 24.9 MiB | 64.2 MiB |
    | 4,096 | 101.3 MiB | 970.5 MiB |
    | 16,384 | 405.4 MiB | 14,641.8 MiB |
  Reformer's grows linearly (x4 per x4 tokens), full attention's quadratically (x15 from
  4k to 16k): Reformer needs less from 1k tokens up at this width.
"""
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from flax import linen as nn

from bert_jax.models.config import BertConfig, config_for_size
from bert_jax.models.task_models import BertForPreTraining

_WHAT = flags.DEFINE_enum("what", "reversible", ["reversible", "length"], "Which table.")
_LAYERS = flags.DEFINE_integer("layers", 12, "Layers (reversible table).")
_LENGTH = flags.DEFINE_integer("length", 4096, "Tokens per row (reversible table).")
_LENGTHS = flags.DEFINE_list("lengths", ["1024", "4096", "16384"], "Lengths (length table).")


def compiled_memory(config: BertConfig, length: int) -> tuple[int, int, float]:
  """(temporary bytes, argument bytes, compile seconds) of one gradient step, batch 1."""
  ids = jnp.zeros((1, length), jnp.int32)
  model = BertForPreTraining(config)
  params = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), ids[:, :8])["params"]))

  def loss(p):
    logits = model.apply({"params": p}, ids, masked_lm_positions=ids[:, :20]).mlm_logits
    return jnp.mean(jax.nn.log_softmax(logits)[..., 0])
  start = time.perf_counter()
  compiled = jax.jit(jax.grad(loss)).lower(params).compile()
  seconds = time.perf_counter() - start
  analysis = compiled.memory_analysis()
  return analysis.temp_size_in_bytes, analysis.argument_size_in_bytes, seconds


def axial_shape(length: int) -> tuple[int, int]:
  """Two factors of a power-of-two length, the first the smaller."""
  side = 2 ** (int(np.log2(length)) // 2)
  return side, length // side


def reversible_table(layers: int, length: int) -> None:
  config = config_for_size(
      "reformer-tiny", num_hidden_layers=layers, attn_layers=("local",) * layers,
      local_attn_chunk_length=64, max_position_embeddings=length,
      axial_pos_shape=axial_shape(length), hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0)
  rows = {}
  for reversible in (True, False):
    rows[reversible] = compiled_memory(config.replace(reversible=reversible), length)
    temp, args, seconds = rows[reversible]
    print(f"L={layers} T={length} reversible={reversible}: temporaries {temp / 2**20:.1f} MiB, "
          f"arguments {args / 2**20:.1f} MiB (compiled in {seconds:.0f} s)")
  print(f"reversible / plain temporaries: {rows[True][0] / rows[False][0]:.3f}")


def length_table(lengths: list[int]) -> None:
  print("| tokens | Reformer (local + LSH) | BERT full attention |")
  print("|---:|---:|---:|")
  for length in lengths:
    reformer = config_for_size("reformer-tiny", max_position_embeddings=length,
                               axial_pos_shape=axial_shape(length))
    bert = config_for_size("tiny", max_position_embeddings=length, vocab_size=8192)
    cells = []
    for config in (reformer.replace(vocab_size=8192), bert):
      temp, _, _ = compiled_memory(config, length)
      cells.append(f"{temp / 2**20:,.1f} MiB")
    print(f"| {length:,} | {cells[0]} | {cells[1]} |")


def main(argv):
  del argv
  print(f"backend: {jax.default_backend()}, devices: {jax.devices()}")
  if _WHAT.value == "reversible":
    reversible_table(_LAYERS.value, _LENGTH.value)
  else:
    length_table([int(x) for x in _LENGTHS.value])


if __name__ == "__main__":
  app.run(main)
