r"""Where a fine-tuning step's time goes, ours vs HF transformers (PyTorch), CPU, one run.

  python bench/finetune_split.py                 # SST-2, batches packed per batch (ours)
  python bench/finetune_split.py --no_pack       # ours dynamically padded too

all-MiniLM-L6-v2 on SST-2 training rows, batch 32, fp32, dropout on, AdamW 1e-4 with
clipping at 1.0 (bench/finetune_step.py's settings). The same `--batches` batches of 32
examples go to both sides: ours packed per batch (data.pack_each_batch, the CLI's layout)
or padded to their longest row rounded up to the config's multiple, HF padded to each
batch's longest row. Each part is timed alone on the same batches, each after its own
warm-up:
  forward            the loss (train mode, dropout on);
  forward + backward the loss's gradients;
  optimizer          clipping + AdamW on one set of gradients (ours jitted alone);
  step               the whole step (ours one jitted function, as the trainer runs it).
Prints milliseconds per batch for each part, each side, and their ratio (HF / ours: > 1
means ours is faster). The parts do not add up to the step on our side: XLA fuses the
optimizer into the step.

`--profile_ops=N` also traces our forward + backward on the batches of the first batch's
shape and prints its N costliest op groups (bench/op_profile.py), in ms per batch.
"""
import argparse
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # finetune_step
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import finetune_step  # noqa: E402
import op_profile  # noqa: E402


def _timed(fn, batches, repeats: int) -> float:
  """Milliseconds per batch of fn(batch) (each result waited for), after one warm-up pass."""
  for batch in batches:
    fn(batch)
  start = time.perf_counter()
  for _ in range(repeats):
    for batch in batches:
      fn(batch)
  return (time.perf_counter() - start) * 1000 / (repeats * len(batches))


def ours(config, batches, repeats, profile_ops: int = 0):
  import optax
  from flax import linen as nn

  from bert_jax.core import optim
  from bert_jax.run import tasks
  from bert_jax import weights
  from bert_jax.run import trainer
  task = tasks.make_task(config, trainer.resolve_model_config(config))
  model = task.build_model()
  first = {k: jnp.asarray(v) for k, v in batches[0].items()}
  params = nn.unbox(model.init({"params": jax.random.key(0), "dropout": jax.random.key(1)},
                               first["input_ids"], first["token_type_ids"],
                               first["attention_mask"])["params"])
  params, _ = weights.init_params(jax.device_get(params), config.init_from, task.model_config)
  tx, _ = optim.make_optimizer(config.optim, 1000)
  opt_state = tx.init(params)
  rng = jax.random.key(2)

  def loss(p, batch):
    outputs = task.forward(model, p, batch, deterministic=False, rng=rng)
    return task.loss(task.loss_sums(outputs, batch), task.denominators(batch))

  forward = jax.jit(loss)
  grad = jax.jit(jax.grad(loss))

  @jax.jit
  def update(p, o, g):
    updates, o = tx.update(g, o, p)
    return optax.apply_updates(p, updates), o

  @jax.jit
  def step(p, o, batch):
    return update(p, o, jax.grad(loss)(p, batch))

  device = [{k: jnp.asarray(v) for k, v in b.items()} for b in batches]
  grads = grad(params, device[0])
  holder = {"p": params, "o": opt_state}

  def whole(batch):
    holder["p"], holder["o"] = step(holder["p"], holder["o"], batch)
    jax.block_until_ready(holder["p"])

  if profile_ops:
    same = [b for b in device if b["input_ids"].shape == device[0]["input_ids"].shape]
    cycled = itertools.cycle(same)
    op_profile.print_costliest("Our forward + backward", op_profile.costliest(
        grad.lower(params, same[0]).compile().as_text(),
        lambda: jax.block_until_ready(grad(params, next(cycled))),
        calls=2 * len(same), top=profile_ops))
  return {
      "forward": _timed(lambda b: jax.block_until_ready(forward(params, b)), device, repeats),
      "forward + backward": _timed(lambda b: jax.block_until_ready(grad(params, b)), device,
                                   repeats),
      "optimizer": _timed(lambda b: jax.block_until_ready(update(params, opt_state, grads)),
                          device, repeats),
      "step": _timed(whole, device, repeats)}


def hf(config, batches, repeats):
  import torch
  model, opt, to_torch = finetune_step.hf_setup("sst2", config)
  inputs = [to_torch(b) for b in batches]
  model(**inputs[0]).loss.backward()  # gradients exist for the optimizer-only timing

  def forward(batch):
    with torch.enable_grad():
      model(**batch).loss.item()

  def backward(batch):
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()

  def optimizer(batch):
    del batch
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()

  def step(batch):
    opt.zero_grad(set_to_none=True)
    model(**batch).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()

  backward(inputs[0])
  return {"forward": _timed(forward, inputs, repeats),
          "forward + backward": _timed(backward, inputs, repeats),
          "optimizer": _timed(optimizer, inputs, repeats),
          "step": _timed(step, inputs, repeats)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batches", type=int, default=6)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--train_examples", type=int, default=4000)
  parser.add_argument("--no_pack", action="store_true",
                      help="ours padded to the config's multiple instead of packed per batch")
  parser.add_argument("--profile_ops", type=int, default=0,
                      help="also print our forward + backward's N costliest op groups")
  args = parser.parse_args()
  from bert_jax.run import tasks
  from bert_jax.run import trainer
  from bert_jax.finetune import array_input
  from bert_jax.text.tokenizers import make_tokenizer
  settings = argparse.Namespace(
      lr=1e-4, train_examples=args.train_examples, pad_to_multiple_of=None, attention_impl="",
      packing=0, pack_each_batch=not args.no_pack, packed_rows_multiple=1)
  config = finetune_step.make_config("sst2", settings)
  task = tasks.make_task(config, trainer.resolve_model_config(config))
  inputs = task.make_inputs(make_tokenizer(config.data, model_dir=config.init_from), 0, 1)
  ours_batches = [next(inputs.train) for _ in range(args.batches)]
  # HF: the same examples, batch by batch, padded to each batch's longest row.
  plain = array_input.ArrayInput(inputs.train.features, config.data.batch_size,
                                 config.data.seed, pad_to_multiple_of=1)
  hf_batches = [next(plain) for _ in range(args.batches)]
  layout = ("packed per batch, rows " + str([b["input_ids"].shape[0] for b in ours_batches])
            if not args.no_pack else
            "padded, widths " + str([b["input_ids"].shape[1] for b in ours_batches]))
  import torch
  from bert_jax.run import run_report
  print(f"all-MiniLM-L6-v2, SST-2, {args.batches} batches of 32 "
        f"({run_report.device_description()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads); ours {layout}; HF "
        f"widths {[b['input_ids'].shape[1] for b in hf_batches]}")
  ours_ms = ours(config, ours_batches, args.repeats, args.profile_ops)
  hf_ms = hf(config, hf_batches, args.repeats)
  print(f"{'part':22s} {'ours ms':>9s} {'HF ms':>9s} {'HF/ours':>8s}")
  for part, ms in ours_ms.items():
    print(f"{part:22s} {ms:9.1f} {hf_ms[part]:9.1f} {hf_ms[part] / ms:7.2f}x", flush=True)


if __name__ == "__main__":
  main()
