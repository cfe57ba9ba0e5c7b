"""Pretraining step throughput: ours (jitted JAX) vs HF BertForPreTraining (PyTorch), CPU.

Same shapes, same batch, fp32, AdamW on both sides, dropout on; the two are timed in
alternating rounds in this one process, so machine noise hits both alike. Each round runs
one untimed step of a side before timing its next `--steps_per_round`: a step that comes
straight after the other framework's runs slower (measured here: our base step 3.1-4.5 s
right after an HF step, 2.5-2.9 s after one of ours, with OMP_WAIT_POLICY=PASSIVE too; HF's
first step after ours also runs ~7% slower), and a training run only follows its own
steps. Also prints the FLOP/s our step achieves (XLA's cost analysis of the compiled step)
against a plain jnp.dot peak measured in the same run. `--profile_ops=N` then traces two of
our steps and prints their N costliest op groups (bench/op_profile.py).

  python bench/train_step.py --size=mini --batch=32 --seq=128
  python bench/train_step.py --size=base --batch=8 --seq=128
"""
import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # op_profile
import op_profile  # noqa: E402

from bert_jax.run import run_report  # noqa: E402


def make_batch(rng, batch, seq, vocab, predictions):
  ids = rng.integers(1000, vocab, size=(batch, seq)).astype(np.int32)
  ids[:, 0] = 101
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq), predictions, replace=False)
                                for _ in range(batch)]), axis=1).astype(np.int32)
  return {
      "input_ids": ids,
      "token_type_ids": (np.arange(seq)[None] >= seq // 2).astype(np.int32).repeat(batch, 0),
      "attention_mask": np.ones((batch, seq), np.int32),
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(ids, positions, 1),
      "masked_lm_weights": np.ones((batch, predictions), np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(batch,)).astype(np.int32),
  }


def ours(model_config, batch_np, objectives="mlm,nsp"):
  """A jitted step built exactly as the trainer builds it (loss: `objectives`); returns a
  no-arg runner, the compiled step's FLOPs and its HLO text."""
  from flax import linen as nn

  from bert_jax.core import optim
  from bert_jax.run import steps
  import ml_collections

  from bert_jax.pretrain.pipeline import default_data_config
  from bert_jax.pretrain.task import PretrainingTask
  config = ml_collections.ConfigDict({"objectives": objectives, "data": default_data_config()})
  task = PretrainingTask(config, model_config)  # MLM + NSP by default, as BERT
  model = task.build_model()
  optim_config = optim.default_optim_config()
  optim_config.warmup_steps = 10
  tx, schedule = optim.make_optimizer(optim_config, 1000)
  batch = jax.tree.map(jnp.asarray, batch_np)
  params = nn.unbox(model.init(jax.random.key(0), batch["input_ids"])["params"])
  state = steps.TrainState(step=jnp.zeros((), jnp.int32), params=params,
                             opt_state=tx.init(params))
  step = jax.jit(steps.make_train_step(task, model, tx, schedule, 1, jax.random.key(1)),
                 donate_argnums=0)
  compiled = step.lower(state, batch).compile()
  flops = float(compiled.cost_analysis().get("flops", 0.0))
  holder = {"state": state}

  def run():
    holder["state"], metrics = compiled(holder["state"], batch)
    jax.block_until_ready(metrics["loss"])
  return run, flops, compiled.as_text()


def reference(model_config, batch_np):
  import torch
  import transformers
  hf_config = transformers.BertConfig(**model_config.to_hf_dict())
  model = transformers.BertForPreTraining(hf_config).train()
  opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
  ids = torch.tensor(batch_np["input_ids"], dtype=torch.long)
  labels = torch.full_like(ids, -100)
  rows = torch.arange(ids.shape[0])[:, None]
  pos = torch.tensor(batch_np["masked_lm_positions"], dtype=torch.long)
  labels[rows, pos] = torch.tensor(batch_np["masked_lm_ids"], dtype=torch.long)
  inputs = dict(input_ids=ids,
                token_type_ids=torch.tensor(batch_np["token_type_ids"], dtype=torch.long),
                attention_mask=torch.tensor(batch_np["attention_mask"], dtype=torch.long),
                labels=labels,
                next_sentence_label=torch.tensor(batch_np["next_sentence_labels"],
                                                 dtype=torch.long))

  def run():
    opt.zero_grad(set_to_none=True)
    loss = model(**inputs).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
  return run


def matmul_peak(n=2048, repeats=5):
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  dot = jax.jit(lambda x, y: x @ y)
  dot(a, a).block_until_ready()
  best = min(_timed(lambda: dot(a, a).block_until_ready()) for _ in range(repeats))
  return 2 * n ** 3 / best


def _timed(fn):
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def add_shape_arguments(parser, warmup: int = 2):
  """The flags of a step bench's shapes and rounds (this file's and keras_hub_peer.py's)."""
  parser.add_argument("--size", default="mini")
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--vocab", type=int, default=30522)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps_per_round", type=int, default=2)
  parser.add_argument("--warmup", type=int, default=warmup)


def alternate(runs, args) -> list[list[float]]:
  """Each run's step times: args.warmup untimed steps of each, then args.rounds rounds in
  turn, each run's round an untimed step (it settles the machine after the other side's
  step) and args.steps_per_round timed ones, so both see the same machine state."""
  for _ in range(args.warmup):
    for run in runs:
      run()
  times = [[] for _ in runs]
  for _ in range(args.rounds):
    for run, timed in zip(runs, times):
      run()
      timed.extend(_timed(run) for _ in range(args.steps_per_round))
  return times


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_shape_arguments(parser)
  parser.add_argument("--profile_ops", type=int, default=0,
                      help="also print our step's N costliest op groups")
  args = parser.parse_args()

  from bert_jax.models.config import config_for_size
  model_config = config_for_size(args.size, vocab_size=args.vocab)
  batch = make_batch(np.random.default_rng(0), args.batch, args.seq, args.vocab,
                     args.predictions)
  ours_run, flops, hlo = ours(model_config, batch)
  ref_run = reference(model_config, batch)
  ours_times, ref_times = alternate((ours_run, ref_run), args)
  tokens = args.batch * args.seq
  ours_tps = tokens / statistics.median(ours_times)
  ref_tps = tokens / statistics.median(ref_times)
  peak = matmul_peak()
  achieved = flops / statistics.median(ours_times)
  print(f"{args.size} (L{model_config.num_hidden_layers}/H{model_config.hidden_size}) "
        f"batch {args.batch} seq {args.seq} vocab {args.vocab}, fp32, "
        f"{run_report.device_description()}")
  print(f"  ours (JAX):        {ours_tps:10,.0f} tokens/s  (median of {len(ours_times)} steps, "
        f"{statistics.median(ours_times) * 1e3:.0f} ms/step)")
  print(f"  HF (PyTorch):      {ref_tps:10,.0f} tokens/s  "
        f"({statistics.median(ref_times) * 1e3:.0f} ms/step)")
  print(f"  ratio ours/HF:     {ours_tps / ref_tps:10.2f}x")
  print(f"  ours achieved:     {achieved / 1e9:10.1f} GFLOP/s of {flops / 1e9:.1f} GFLOP/step; "
        f"jnp.dot peak {peak / 1e9:.1f} GFLOP/s -> {achieved / peak:.0%} of peak")
  if args.profile_ops:
    op_profile.print_costliest("Our step", op_profile.costliest(hlo, ours_run, calls=2,
                                                                top=args.profile_ops))


if __name__ == "__main__":
  main()
