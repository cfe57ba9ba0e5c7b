"""Input throughput of each masking selector on the real corpus, next to what the tiny
train step consumes (shared machine: run both in one process, compare the ratio).

  python bench/masking_speed.py --corpus=runs/corpus/pretrain.txt [--batches=150]

For each name in selectors.SELECTORS: the pretraining stream (NSP pairs of the prepared
corpus, 32 x 128, 20 predictions, masks drawn in tf.data) consumed for --batches batches
after a warm-up: rows/s. Then the BERT-Tiny pretraining step (bench/train_step.py's `ours`,
built as the trainer builds it, MLM + NSP, batch 32 x 128) timed for --steps steps: rows/s
it consumes. ratio = selector rows/s / train rows/s (the issue asks >= 10). The last line
is one JSON object with these numbers. (Not named bench/selectors.py: run as a script,
that would shadow the standard library's `selectors`, which subprocess imports.)
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
  args = parser.parse_args()

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


if __name__ == "__main__":
  main()
