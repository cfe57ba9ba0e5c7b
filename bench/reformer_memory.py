r"""Compiled memory of a Reformer training step: reversible vs plain layers, and Reformer
vs BERT-style full attention of the same width, from compilation alone (nothing runs).

  python bench/reformer_memory.py --what=reversible --layers=12 --length=4096
  python bench/reformer_memory.py --what=length --lengths=1024,4096,16384,65536

`reversible`: the gradient of the MLM loss through L local-attention layers, compiled with
reversible=True and False; prints both temporaries (activation memory) and their ratio.
`length`: the same step for reformer-tiny's width (H 128, 2 heads of 64, local and LSH
layers alternating, --length_layers of them) and for a BERT of that width and depth (full
attention), at each length, batch 1; each step whose compiled memory fits --budget_gib is
also run (median of 3 after a warm-up) for its time per step and per token.
Memory is XLA's `memory_analysis()` of the compiled step for the default backend.

Measured on the CPU backend (jax 0.10.2, 2026-11-28, at commit b0b8264 + this script):
  --what=reversible --layers=12 --length=2048: temporaries 59.8 MiB reversible against
    325.6 MiB plain, a ratio of 0.184 (--layers=4 --length=1024: 22.3 / 58.4 MiB, 0.382).
  --what=length --lengths=1024,4096,16384 --length_layers=2 (H 128, batch 1; memory only):
    | tokens | Reformer (local + LSH) | BERT full attention |
    |---:|---:|---:|
    | 1,024 | 24.9 MiB | 64.2 MiB |
    | 4,096 | 101.3 MiB | 970.5 MiB |
    | 16,384 | 405.4 MiB | 14,641.8 MiB |
  Reformer's grows linearly (x4 per x4 tokens), full attention's quadratically (x15 from
  4k to 16k): Reformer needs less from 1k tokens up at this width.
  --what=length --lengths=256,512,1024,4096,16384,65536 (4 layers; 2026-11-28, 275d5b4,
  2-core AMD EPYC with 24 GiB, shared): the table of docs/guides/family.md; at 16,384
  tokens the Reformer step runs (481.6 MiB, 6.7 s) where full attention needs 27.3 GiB and
  does not fit; Reformer is faster from 512 tokens up.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax/

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402
from flax import linen as nn  # noqa: E402

from bert_jax.models.config import BertConfig, config_for_size  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402

_WHAT = flags.DEFINE_enum("what", "reversible", ["reversible", "length"], "Which table.")
_LAYERS = flags.DEFINE_integer("layers", 12, "Layers (reversible table).")
_LENGTH = flags.DEFINE_integer("length", 4096, "Tokens per row (reversible table).")
_LENGTHS = flags.DEFINE_list("lengths", ["1024", "4096", "16384", "65536"],
                              "Lengths (length table).")
_LENGTH_LAYERS = flags.DEFINE_integer("length_layers", 4, "Layers (length table).")
_BUDGET = flags.DEFINE_float("budget_gib", 0.0, "Memory a step may use to be run (length "
                             "table; 0: 80% of this machine's memory).")


def compile_step(config: BertConfig, length: int):
  """(the compiled gradient step of batch 1, its params' shapes, compile seconds)."""
  ids = jnp.zeros((1, length), jnp.int32)
  model = BertForPreTraining(config)
  params = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), ids[:, :8])["params"]))

  def loss(p, ids):
    logits = model.apply({"params": p}, ids, masked_lm_positions=ids[:, :20]).mlm_logits
    return jnp.mean(jax.nn.log_softmax(logits)[..., 0])
  start = time.perf_counter()
  compiled = jax.jit(jax.grad(loss)).lower(params, ids).compile()
  return compiled, params, time.perf_counter() - start


def compiled_memory(config: BertConfig, length: int) -> tuple[int, int, float]:
  """(temporary bytes, argument bytes, compile seconds) of one gradient step, batch 1."""
  compiled, _, seconds = compile_step(config, length)
  analysis = compiled.memory_analysis()
  return analysis.temp_size_in_bytes, analysis.argument_size_in_bytes, seconds


def step_seconds(config: BertConfig, length: int, repeats: int = 3) -> float:
  """Median wall seconds of the compiled gradient step on random ids (batch 1)."""
  compiled, shapes, _ = compile_step(config, length)
  leaves, treedef = jax.tree.flatten(shapes)
  keys = jax.random.split(jax.random.key(0), len(leaves))
  params = jax.tree.unflatten(treedef, [0.02 * jax.random.normal(k, x.shape, x.dtype)
                                        for k, x in zip(keys, leaves)])
  ids = jax.random.randint(jax.random.key(1), (1, length), 5, config.vocab_size)
  jax.block_until_ready(compiled(params, ids))  # warm-up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(compiled(params, ids))
    times.append(time.perf_counter() - start)
  return float(np.median(times))


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


def length_table(lengths: list[int], layers: int, budget: float) -> None:
  """Temporaries of both stacks at each length; the step's time where it fits `budget`."""
  print(f"{layers} layers, H 128, 2 heads of 64, vocabulary 8,192, batch 1; time where the "
        f"compiled step fits {budget / 2**30:.1f} GiB")
  print("| tokens | Reformer memory | Reformer ms/step | Reformer us/token | "
        "full attention memory | full attention ms/step | full attention us/token |")
  print("|---:|---:|---:|---:|---:|---:|---:|")
  for length in lengths:
    reformer = config_for_size(
        "reformer-tiny", num_hidden_layers=layers, attn_layers=("local", "lsh") * (layers // 2)
        + ("local",) * (layers % 2), max_position_embeddings=length,
        axial_pos_shape=axial_shape(length), vocab_size=8192)
    bert = config_for_size("tiny", num_hidden_layers=layers, max_position_embeddings=length,
                           vocab_size=8192)
    cells = []
    for config in (reformer, bert):
      temp, args, _ = compiled_memory(config, length)
      cells.append(f"{temp / 2**20:,.1f} MiB")
      if temp + args <= budget:
        seconds = step_seconds(config, length)
        cells += [f"{seconds * 1e3:,.0f}", f"{seconds * 1e6 / length:,.1f}"]
      else:
        cells += ["does not fit", "-"]
    print(f"| {length:,} | " + " | ".join(cells) + " |", flush=True)


def main(argv):
  del argv
  print(f"backend: {jax.default_backend()}, devices: {jax.devices()}")
  if _WHAT.value == "reversible":
    reversible_table(_LAYERS.value, _LENGTH.value)
  else:
    budget = _BUDGET.value * 2**30 or 0.8 * os.sysconf("SC_PAGE_SIZE") * os.sysconf(
        "SC_PHYS_PAGES")
    length_table([int(x) for x in _LENGTHS.value], _LENGTH_LAYERS.value, budget)


if __name__ == "__main__":
  app.run(main)
