r"""Fine-tuning packing fill: real tokens / positions of the packed training rows.

  python bench/packing_fill.py                     # sst2 and conll, T = 64 and 128
  python bench/packing_fill.py --tasks=sst2 --lengths=64 --packing=8,16,-1

The training split of each task, featurised as the CLI does (all-MiniLM-L6-v2's
tokenizer), packed by bert_jax/finetune/example_packing.py at each `data.packing` value (the most
examples per row; -1 = as many as fit). Prints per setting: rows, fill, the share of rows
that stopped at the cap, and the bound (the fill if every row were full but the last).
Host-side numpy only; a few seconds per setting.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

CONFIGS = {"sst2": ("glue", "dataset=sst2"), "conll": ("conll", "")}


def train_features(task: str, seq_len: int) -> dict:
  import importlib

  from bert_jax.run import tasks
  from bert_jax.run import trainer
  from bert_jax.text.tokenizers import make_tokenizer
  module, arg = CONFIGS[task]
  config = importlib.import_module(f"configs.{module}").get_config(arg)
  tokenizer = make_tokenizer(config.data, model_dir=config.init_from)
  spec = tasks.make_task(config, trainer.resolve_model_config(config))
  features, _ = spec.reader.load_split(config.data, config.data.train_split, tokenizer, seq_len)
  keep = ("input_ids", "token_type_ids", "attention_mask") + spec.label_keys
  return {k: features[k] for k in keep}


def main():
  from bert_jax.finetune import example_packing
  parser = argparse.ArgumentParser()
  parser.add_argument("--tasks", default="sst2,conll")
  parser.add_argument("--lengths", default="64,128")
  parser.add_argument("--packing", default="8,16,-1")
  args = parser.parse_args()
  for task in args.tasks.split(","):
    for seq_len in map(int, args.lengths.split(",")):
      features = train_features(task, seq_len)
      lengths = features["attention_mask"].sum(-1)
      bound = lengths.sum() / (np.ceil(lengths.sum() / seq_len) * seq_len)
      print(f"{task} T={seq_len}: {len(lengths)} examples of {lengths.mean():.1f} tokens; "
            f"unpacked fill {example_packing.fill_rate(features):.3f}, bound {bound:.4f}")
      for k in map(int, args.packing.split(",")):
        start = time.perf_counter()
        packed = example_packing.pack(features, k)
        seconds = time.perf_counter() - start
        per_row = (packed["example_mask"] > 0).sum(-1)
        at_cap = float(np.mean(per_row == k)) if k > 0 else 0.0
        print(f"  packing={k:>3}: {len(per_row)} rows, fill {example_packing.fill_rate(packed):.4f}, "
              f"{at_cap:.3f} of rows at the cap, at most {per_row.max()} per row "
              f"({seconds:.1f} s)")


if __name__ == "__main__":
  main()
