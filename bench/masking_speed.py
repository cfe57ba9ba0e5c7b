r"""Input throughput of each masking selector on the real corpus, next to what the tiny
train step consumes (shared machine: run both in one process, compare the ratio).

  python bench/masking_speed.py --corpus=runs/corpus/pretrain.txt [--batches=150]

For each name in selectors.SELECTORS: the pretraining stream (NSP pairs of the prepared
corpus, 32 x 128, 20 predictions, masks drawn in tf.data) consumed for --batches batches
after a warm-up: rows/s. Then the BERT-Tiny pretraining step (bench/train_step.py's `ours`,
built as the trainer builds it, MLM + NSP, batch 32 x 128) timed for --steps steps: rows/s
it consumes. ratio = selector rows/s / train rows/s (the issue asks >= 10). The last line
is one JSON object with these numbers. (Not named bench/selectors.py: run as a script,
that would shadow the standard library's `selectors`, which subprocess imports.)

`--blocks` times the masking alone instead: `masking.mask_batch` (with its noise) in one
tf.function on the stream's own blocks (512 unmasked rows of the corpus's nsp_pairs epoch
a call, as the stream maps 8 batches of 64), each scheme that reads no span annotations,
in alternating rounds: tokens (rows x T) per CPU-second of this process, and each
scheme's CPU per token over token masking's from the same rounds.

  python bench/masking_speed.py --corpus=/tmp/pretrain.txt --blocks \
      --max_seq_length=512 --max_predictions_per_seq=80
"""
import argparse
import json
import os
import sys
import time

import numpy as np

from bert_jax.models.config import config_for_size
from bert_jax.pretrain import selectors
from bert_jax.pretrain import pipeline
from bert_jax.text.tokenizers import make_tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import input_pipeline  # noqa: E402  (bench/: consume)
import train_step  # noqa: E402  (bench/: ours, make_batch)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--corpus", default="runs/corpus/pretrain.txt")
  parser.add_argument("--batches", type=int, default=150)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--blocks", action="store_true",
                      help="the masking alone on 512-row blocks, per CPU-second")
  parser.add_argument("--max_seq_length", type=int, default=128, help="with --blocks")
  parser.add_argument("--max_predictions_per_seq", type=int, default=20, help="with --blocks")
  parser.add_argument("--rounds", type=int, default=4, help="with --blocks")
  args = parser.parse_args()
  if args.blocks:
    return masking_blocks(args)

  config = pipeline.default_data_config()
  config.update(dict(train_files=(os.path.abspath(args.corpus),), batch_size=32,
                     max_seq_length=128, max_predictions_per_seq=20,
                     cache_dir=os.path.abspath("runs/cache")))
  tokenizer = make_tokenizer(config)
  corpora, _ = pipeline.load_corpora(config, tokenizer)
  results = {}
  for name in selectors.SELECTORS:
    config.masking = name
    train_input = pipeline.PretrainingInput(corpora, tokenizer, config)
    input_pipeline.consume(train_input, 1)
    train_input.steps_in_epoch(1)  # the next epoch's rows, built before the clock starts
    input_pipeline.consume(train_input, 10)
    results[f"{name}_rows_per_s"] = input_pipeline.consume(train_input, args.batches)

  run, _ = train_step.ours(config_for_size("tiny"), train_step.make_batch(
      np.random.default_rng(0), 32, 128, 30522, 20))
  run()
  start = time.perf_counter()
  for _ in range(args.steps):
    run()
  results["train_rows_per_s"] = 32 * args.steps / (time.perf_counter() - start)
  for name in selectors.SELECTORS:
    results[f"{name}_ratio"] = results[f"{name}_rows_per_s"] / results["train_rows_per_s"]
  for key, value in results.items():
    print(f"{key:24s} {value:10.1f}")
  print(json.dumps({key: round(value, 2) for key, value in results.items()}))


BLOCK_ROWS = 512  # the stream's map: 8 batches of 64 rows


def masking_blocks(args) -> dict:
  """--blocks: mask_batch's tokens per CPU-second on the corpus's rows, by scheme."""
  import tensorflow as tf
  from bert_jax.pretrain import masking

  seq = args.max_seq_length
  config = pipeline.default_data_config()
  config.update(dict(train_files=(os.path.abspath(args.corpus),), batch_size=64,
                     max_seq_length=seq, max_predictions_per_seq=args.max_predictions_per_seq,
                     cache_dir=os.path.abspath("runs/cache")))
  tokenizer = make_tokenizer(config)
  corpora, _ = pipeline.load_corpora(config, tokenizer)
  rows = next(iter(pipeline.PretrainingInput(corpora, tokenizer, config)
                   .unmasked_rows(0).values())).input_ids
  blocks = [tf.constant(rows[i:i + BLOCK_ROWS].astype(np.int32))
            for i in range(0, len(rows) - BLOCK_ROWS + 1, BLOCK_ROWS)][:16]
  schemes = [name for name, selector in selectors.SELECTORS.items() if not selector.reads_spans]

  def timed(name):
    config.masking = name
    options = pipeline.masking_options(config, tokenizer)
    size = masking.noise_size(seq, options)

    @tf.function
    def mask(input_ids, first):
      index = first + tf.range(tf.shape(input_ids)[0], dtype=tf.int64)
      return masking.mask_batch(input_ids, masking.example_noise(0, 0, index, size), options)
    return mask

  masks = {name: timed(name) for name in schemes}
  rates = {name: [] for name in schemes}
  for _ in range(args.rounds):
    for name, mask in masks.items():
      mask(blocks[0], tf.constant(0, tf.int64))["input_ids"].numpy()  # traced before the clock
      start = time.process_time()
      for i, block in enumerate(blocks):
        out = mask(block, tf.constant(i * BLOCK_ROWS, tf.int64))
      out["input_ids"].numpy()
      rates[name].append(len(blocks) * BLOCK_ROWS * seq / (time.process_time() - start))
  results = {name: float(np.median(r)) for name, r in rates.items()}
  print(f"T = {seq}, {config.max_predictions_per_seq} predictions, {len(blocks)} blocks of "
        f"{BLOCK_ROWS} rows, median of {args.rounds} rounds")
  print("| masking | tokens/CPU-s (mask_batch) | CPU per token over token's |")
  print("|---|---|---|")
  for name, rate in results.items():
    print(f"| {name} | {rate / 1e3:,.0f}k | {results['token'] / rate:.2f}x |")
  print(json.dumps({"seq": seq, "tokens_per_cpu_s": {k: round(v) for k, v in results.items()}}))
  return results


if __name__ == "__main__":
  main()
