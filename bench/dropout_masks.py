r"""Dropout masks: ours (16 random bits an element, two per threefry word) vs
jax.random.bernoulli (one threefry evaluation an element), CPU, in one run.

Times drawing and applying every dropout mask of one BERT training step (the embedding
output, per layer the attention probabilities and the two sub-layer outputs), jitted, each
side alternately after its own warm-up; then the whole train step (bench/train_step.py's,
the trainer's) with the model's masks from each side, against the same step with dropout
off (the floor: what the masks cost at all).

  python bench/dropout_masks.py --size=base --batch=8
  python bench/dropout_masks.py --size=mini --batch=32 --step=false
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # train_step
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bert_jax.run import run_report  # noqa: E402
from bert_jax.models import dropout as dropout_lib  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402


def bernoulli_dropout(x, rate, rng):
  """flax.linen.Dropout's rule (what bert_jax used before)."""
  if rate == 0.0 or rng is None:
    return x
  keep = jax.random.bernoulli(rng, 1.0 - rate, x.shape)
  return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def step_shapes(cfg, batch, seq):
  """Every dropout site of one forward pass: [(shape, rate)]."""
  hidden = ((batch, seq, cfg.hidden_size), cfg.hidden_dropout_prob)
  probs = ((batch, cfg.num_attention_heads, seq, seq), cfg.attention_probs_dropout_prob)
  return [hidden] + [probs, hidden, hidden] * cfg.num_hidden_layers


def masks_runner(fn, shapes):
  xs = [jnp.ones(shape, jnp.float32) for shape, _ in shapes]

  @jax.jit
  def all_masks(xs, rng):
    keys = jax.random.split(rng, len(xs))
    return sum(fn(x, rate, k).sum() for x, (_, rate), k in zip(xs, shapes, keys))

  rng = jax.random.key(0)
  all_masks(xs, rng).block_until_ready()
  return lambda: all_masks(xs, rng).block_until_ready()


def timed(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def alternate(runners, rounds, per_round):
  times = {name: [] for name in runners}
  for _ in range(rounds):
    for name, run in runners.items():
      run()  # untimed: settles the machine after the other side
      times[name] += [timed(run) for _ in range(per_round)]
  return {name: statistics.median(t) for name, t in times.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="base")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps_per_round", type=int, default=3)
  parser.add_argument("--step", default="true", help="also time the whole train step")
  args = parser.parse_args()
  cfg = config_for_size(args.size, vocab_size=30522)
  shapes = step_shapes(cfg, args.batch, args.seq)
  count = sum(int(np.prod(s)) for s, _ in shapes)
  masks = alternate({"ours": masks_runner(dropout_lib.dropout, shapes),
                     "bernoulli": masks_runner(bernoulli_dropout, shapes)},
                    args.rounds, args.steps_per_round)
  print(f"{args.size} (L{cfg.num_hidden_layers}/H{cfg.hidden_size}) batch {args.batch} seq "
        f"{args.seq}: {len(shapes)} dropout sites, {count / 1e6:.1f} M elements a step, "
        f"{run_report.device_description()}")
  print(f"  masks, ours (16-bit):     {masks['ours'] * 1e3:8.0f} ms a step")
  print(f"  masks, jax bernoulli:     {masks['bernoulli'] * 1e3:8.0f} ms a step")
  print(f"  ratio bernoulli/ours:     {masks['bernoulli'] / masks['ours']:8.2f}x")
  if args.step.lower() not in ("true", "1", "yes"):
    return
  import train_step
  batch = train_step.make_batch(np.random.default_rng(0), args.batch, args.seq, 30522, 20)
  runners = {"ours": train_step.ours(cfg, batch)[0]}
  original = dropout_lib.dropout
  dropout_lib.dropout = bernoulli_dropout  # what the model's Dropout and attention call
  try:
    runners["bernoulli"] = train_step.ours(cfg, batch)[0]
  finally:
    dropout_lib.dropout = original
  off = cfg.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  runners["off"] = train_step.ours(off, batch)[0]
  for run in runners.values():
    run()
  step = alternate(runners, args.rounds, args.steps_per_round)
  tokens = args.batch * args.seq
  for name, label in (("ours", "train step, our masks"), ("bernoulli", "train step, bernoulli"),
                      ("off", "train step, no dropout")):
    print(f"  {label + ':':25s} {step[name] * 1e3:8.0f} ms ({tokens / step[name]:,.0f} tokens/s)")
  print(f"  step ratio bernoulli/ours: {step['bernoulli'] / step['ours']:7.2f}x; the masks' share "
        f"of the step: ours {1 - step['off'] / step['ours']:.0%}, bernoulli "
        f"{1 - step['off'] / step['bernoulli']:.0%}")


if __name__ == "__main__":
  main()
