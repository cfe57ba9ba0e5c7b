r"""The feature-based BiLSTM head's recurrence: nn.LSTMCell stepped under nn.scan against
SegmentLSTM (the same parameters, its input projection hoisted out of the recurrence).

  python bench/bilstm_head.py                          # B32 x T64, F384 -> S384 (MiniLM)
  python bench/bilstm_head.py --features=1536          # the last four layers concatenated

Times the gradient of one direction's outputs (what a frozen run's train step takes per
direction and layer) for both, after a compile each, over the same parameters and inputs
(rows of random lengths, padded). Prints both times, their ratio and the largest output
difference.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bert_jax.models import heads  # noqa: E402


class CellScan(nn.Module):
  """The reference: nn.LSTMCell stepped token by token, restarting at segment changes."""
  state_size: int
  reverse: bool = False

  @nn.compact
  def __call__(self, features, segments):
    cell = nn.LSTMCell(self.state_size, param_dtype=jnp.float32, name="cell")
    zeros = jnp.zeros((features.shape[0], self.state_size), jnp.float32)

    def step(cell, carry, inputs):
      x, start = inputs
      carry = jax.tree.map(lambda c: jnp.where(start[:, None], 0.0, c), carry)
      return cell(carry, x)

    scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False},
                   in_axes=1, out_axes=1, reverse=self.reverse)
    _, outputs = scan(cell, (zeros, zeros),
                      (features, heads.sequence_starts(segments, self.reverse)))
    return outputs


def timed(module, params, x, segments, repeats):
  grad = jax.jit(jax.grad(lambda p: module.apply(p, x, segments).sum()))
  jax.block_until_ready(grad(params))
  start = time.perf_counter()
  for _ in range(repeats):
    jax.block_until_ready(grad(params))
  return (time.perf_counter() - start) / repeats


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--length", type=int, default=64)
  parser.add_argument("--features", type=int, default=384)
  parser.add_argument("--state", type=int, default=384)
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(args.batch, args.length, args.features)), jnp.float32)
  lengths = rng.integers(1, args.length + 1, size=(args.batch, 1))
  segments = jnp.asarray(np.arange(args.length)[None] < lengths, jnp.int32)
  cell, fused = CellScan(args.state), heads.SegmentLSTM(args.state)
  params = fused.init(jax.random.key(0), x, segments)
  gap = float(jnp.abs(cell.apply(params, x, segments) - fused.apply(params, x, segments)).max())
  before = timed(cell, params, x, segments, args.repeats)
  after = timed(fused, params, x, segments, args.repeats)
  print(f"B{args.batch} T{args.length} F{args.features} S{args.state}, gradient of one "
        f"direction, {jax.devices()[0].platform}:")
  print(f"  nn.LSTMCell under nn.scan  {before * 1e3:8.1f} ms")
  print(f"  SegmentLSTM (hoisted)      {after * 1e3:8.1f} ms")
  print(f"  ratio {before / after:.2f}x; largest output difference {gap:.1e}")


if __name__ == "__main__":
  main()
