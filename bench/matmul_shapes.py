"""fp32 matmul speed at the shapes of one BERT training step: XLA (jnp) vs PyTorch, CPU.

`bench/train_step.py` compares whole steps; this splits out the matmuls, which are most
of a step's time, to show how fast each side runs the same GEMM. Each shape is timed as
its forward product and the two backward products (dX = dY W^T, dW = X^T dY), in
alternating rounds in this one process, so machine noise hits both alike.

  python bench/matmul_shapes.py                       # BERT-Base, batch 8, seq 128
  python bench/matmul_shapes.py --hidden=256 --intermediate=1024 --heads=4 --batch=32
"""
import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def gemms(layers, tokens, hidden, intermediate, heads, seq, vocab, predictions):
  """(name, einsum equation, lhs shape, rhs shape, FLOPs, times per step) of one training
  step's matmuls (forward and backward). The every-token decoder is HF's and runs 0 times
  in ours."""
  head_dim = hidden // heads
  batch = tokens // seq
  out = []
  for name, k, n, per_layer in (("attention projection", hidden, hidden, 4),
                                ("ffn in", hidden, intermediate, 1),
                                ("ffn out", intermediate, hidden, 1)):
    out += [(f"{name} fwd", "mk,kn->mn", (tokens, k), (k, n), per_layer * layers),
            (f"{name} dX", "mn,kn->mk", (tokens, n), (k, n), per_layer * layers),
            (f"{name} dW", "mk,mn->kn", (tokens, k), (tokens, n), per_layer * layers)]
  # Each attention product has two backward products of the same size.
  out += [("attention scores", "bqd,bkd->bqk", (batch * heads, seq, head_dim),
           (batch * heads, seq, head_dim), 3 * layers),
          ("attention context", "bqk,bkd->bqd", (batch * heads, seq, seq),
           (batch * heads, seq, head_dim), 3 * layers),
          (f"MLM decoder, {predictions} masked/row", "mk,nk->mn",
           (batch * predictions, hidden), (vocab, hidden), 3),
          ("MLM decoder, every token (HF)", "mk,nk->mn", (tokens, hidden), (vocab, hidden), 0)]
  return [(name, eq, a, b, 2 * _contracted_size(eq, a, b), count)
          for name, eq, a, b, count in out]


def _contracted_size(equation, a_shape, b_shape):
  """Multiply-adds of an einsum: the product of every distinct index's size."""
  lhs, _ = equation.split("->")
  sizes = {}
  for labels, shape in zip(lhs.split(","), (a_shape, b_shape)):
    sizes.update(zip(labels, shape))
  return int(np.prod(list(sizes.values())))


def _timed(fn, repeats):
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--layers", type=int, default=12)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--hidden", type=int, default=768)
  parser.add_argument("--intermediate", type=int, default=3072)
  parser.add_argument("--heads", type=int, default=12)
  parser.add_argument("--vocab", type=int, default=30522)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--repeats", type=int, default=7)
  args = parser.parse_args()
  import torch

  rng = np.random.default_rng(0)
  print(f"fp32, L{args.layers}, batch {args.batch} x seq {args.seq}, H{args.hidden}/"
        f"I{args.intermediate}/A{args.heads}, vocab {args.vocab}; "
        f"torch threads {torch.get_num_threads()}")
  print(f"{'matmul':36s} {'GFLOP':>7s} {'XLA GFLOP/s':>12s} {'torch GFLOP/s':>14s} "
        f"{'XLA/torch':>10s}")
  totals = [0.0, 0.0]
  for name, eq, a_shape, b_shape, flops, count in gemms(
      args.layers, args.batch * args.seq, args.hidden, args.intermediate, args.heads, args.seq,
      args.vocab, args.predictions):
    a = rng.standard_normal(a_shape, dtype=np.float32)
    b = rng.standard_normal(b_shape, dtype=np.float32)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    xla = jax.jit(lambda x, y, eq=eq: jnp.einsum(eq, x, y))
    xla(ja, jb).block_until_ready()
    np.testing.assert_allclose(np.asarray(xla(ja, jb)), torch.einsum(eq, ta, tb).numpy(),
                               rtol=2e-3, atol=2e-3)
    xla_times, torch_times = [], []
    for _ in range(3):  # alternate, so both see the same machine state
      xla_times.append(_timed(lambda: xla(ja, jb).block_until_ready(), args.repeats))
      torch_times.append(_timed(lambda: torch.einsum(eq, ta, tb), args.repeats))
    xla_s, torch_s = min(xla_times), min(torch_times)
    totals[0] += count * xla_s
    totals[1] += count * torch_s
    print(f"{name:36s} {flops / 1e9:7.2f} {flops / xla_s / 1e9:12.1f} "
          f"{flops / torch_s / 1e9:14.1f} {torch_s / xla_s:9.2f}x")
  print(f"our step's matmuls (each shape x its count per step): XLA {totals[0]:.2f} s, "
        f"torch {totals[1]:.2f} s -> {totals[1] / totals[0]:.2f}x")


if __name__ == "__main__":
  main()
