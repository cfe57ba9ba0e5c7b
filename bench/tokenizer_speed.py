"""Tokens per second: our in-graph WordPieceTokenizer (tf.data) beside HF's BertTokenizerFast.

All tokenize the same corpus lines in batches, without special tokens: ours is a
`tf.data` pipeline that batches lines and maps `tokenize`; HF is `BertTokenizerFast(batch)`
(the usual call, Rust parallel over cores plus transformers' Python wrapping) and, for
reference, its Rust backend alone (`backend_tokenizer.encode_batch`). After one warm-up
pass each, the timed passes alternate between the three (other load on the machine
hits all alike) and the best of `--repeats` is reported.

  python bench/tokenizer_speed.py [--max_lines 20000] [--batch_size 1024]
"""
import argparse
import os
import sys
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_jax.text import paths  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_jax.text import wordpiece as tokenizer  # pylint: disable=g-import-not-at-top,wrong-import-position
import tokenizer_parity  # pylint: disable=g-import-not-at-top,wrong-import-position


def time_ours(ours: tokenizer.WordPieceTokenizer, lines: list[str],
              batch_size: int) -> tuple[int, float]:
  """(pieces, seconds) for one pass of a batched tf.data pipeline over `lines`."""
  dataset = (tf.data.Dataset.from_tensor_slices(lines).batch(batch_size)
             .map(ours.tokenize, num_parallel_calls=tf.data.AUTOTUNE)
             .map(lambda ids: tf.size(ids.flat_values))
             .prefetch(tf.data.AUTOTUNE))
  start = time.perf_counter()
  pieces = sum(int(n) for n in dataset)
  return pieces, time.perf_counter() - start


def time_hf(hf, lines: list[str], batch_size: int) -> tuple[int, float]:
  """(pieces, seconds) for HF batch encoding of `lines`."""
  start = time.perf_counter()
  pieces = 0
  for i in range(0, len(lines), batch_size):
    ids = hf(lines[i:i + batch_size], add_special_tokens=False)["input_ids"]
    pieces += sum(map(len, ids))
  return pieces, time.perf_counter() - start


def time_hf_backend(hf, lines: list[str], batch_size: int) -> tuple[int, float]:
  """(pieces, seconds) for the Rust `tokenizers` backend alone."""
  start = time.perf_counter()
  pieces = 0
  for i in range(0, len(lines), batch_size):
    encodings = hf.backend_tokenizer.encode_batch(
        lines[i:i + batch_size], add_special_tokens=False)
    pieces += sum(len(encoding.ids) for encoding in encodings)
  return pieces, time.perf_counter() - start


def best_of_alternating(runners: dict, repeats: int) -> dict[str, tuple[int, float]]:
  """Name -> (pieces, best seconds); one warm-up each, then alternating timed runs."""
  for run in runners.values():
    run()  # Warm-up: graph tracing, thread pools.
  best = {}
  for _ in range(repeats):
    for name, run in runners.items():
      pieces, seconds = run()
      best[name] = (pieces, min(seconds, best.get(name, (0, float("inf")))[1]))
  return best


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default=paths.default_data_dir())
  parser.add_argument("--max_lines", type=int, default=20000,
                      help="lines per corpus (default 20000)")
  parser.add_argument("--batch_size", type=int, default=1024)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  if not args.data_dir or not os.path.isdir(args.data_dir):
    parser.error(f"no data root at {args.data_dir!r}; pass --data_dir")

  vocab_path = os.path.join(args.data_dir, tokenizer_parity.UNCASED_VOCAB)
  ours = tokenizer.WordPieceTokenizer(vocab_path)
  hf = tokenizer_parity.hf_bert_tokenizer(vocab_path, lower_case=True)
  lines = [line for corpus in tokenizer_parity.corpus_lines(
      args.data_dir, args.max_lines).values() for line in corpus]
  ours_name, hf_name, backend_name = (
      "ours (tf.data, in-graph)", "HF BertTokenizerFast", "HF Rust backend only")
  results = best_of_alternating({
      ours_name: lambda: time_ours(ours, lines, args.batch_size),
      hf_name: lambda: time_hf(hf, lines, args.batch_size),
      backend_name: lambda: time_hf_backend(hf, lines, args.batch_size),
  }, args.repeats)
  if len({pieces for pieces, _ in results.values()}) != 1:
    print(f"WARNING: piece counts differ: {results}")
  print(f"{len(lines)} lines, {results[hf_name][0]} pieces, batch {args.batch_size}, "
        f"{os.cpu_count()} CPUs, best of {args.repeats}")
  for name, (pieces, seconds) in results.items():
    print(f"{name:<26}{pieces / seconds:>12,.0f} tokens/s ({seconds:.2f} s)")
  speedup = {name: results[name][1] / results[ours_name][1]
             for name in (hf_name, backend_name)}
  print(f"ratio ours/{hf_name}: {speedup[hf_name]:.2f}x; "
        f"ours/{backend_name}: {speedup[backend_name]:.2f}x")
  return 0


if __name__ == "__main__":
  sys.exit(main())
