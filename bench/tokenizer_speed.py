"""Tokens per second: each of our tokenizers in tf.data beside its Hugging Face reference.

For each kind (WordPiece: BERT's uncased vocab; byte-level BPE and SentencePiece: the
8k vocabularies of bench/tokenizer_parity.py, learned first if missing) all tokenize the
same corpus lines in batches, without special tokens: ours is a `tf.data` pipeline that
batches lines and maps `tokenize` (WordPiece in-graph; BPE and SentencePiece call their
library in front of the graph); HF is the reference tokenizer's call (`BertTokenizerFast`,
`RobertaTokenizerFast`, `AlbertTokenizerFast`: Rust parallel over cores plus transformers'
Python wrapping) and, for reference, its Rust backend alone (`backend_tokenizer.
encode_batch`); for SentencePiece also the `sentencepiece` library's batch `encode` alone
(no ALBERT preprocessing). After one warm-up pass each, the timed passes of a kind
alternate between its runners (other load on the machine hits all alike) and the best of
`--repeats` is reported.

  python bench/tokenizer_speed.py [--kinds wordpiece,bpe,sentencepiece] [--max_lines 20000]
"""
import argparse
import os
import sys
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_jax.text import paths  # pylint: disable=g-import-not-at-top,wrong-import-position
import tokenizer_parity  # pylint: disable=g-import-not-at-top,wrong-import-position


def time_ours(ours, lines: list[str], batch_size: int) -> tuple[int, float]:
  """(pieces, seconds) for one pass of a batched tf.data pipeline over `lines`."""
  dataset = (tf.data.Dataset.from_tensor_slices(lines).batch(batch_size)
             .map(ours.tokenize, num_parallel_calls=tf.data.AUTOTUNE)
             .map(lambda ids: tf.size(ids.flat_values))
             .prefetch(tf.data.AUTOTUNE))
  start = time.perf_counter()
  pieces = sum(int(n) for n in dataset)
  return pieces, time.perf_counter() - start


def time_batches(encode, lines: list[str], batch_size: int) -> tuple[int, float]:
  """(pieces, seconds) for `encode(batch) -> ids per line` over `lines` in batches."""
  start = time.perf_counter()
  pieces = 0
  for i in range(0, len(lines), batch_size):
    pieces += sum(map(len, encode(lines[i:i + batch_size])))
  return pieces, time.perf_counter() - start


def runners(kind: str, ours, hf, vocab: str, lines: list[str], batch_size: int) -> dict:
  """Name -> a timed pass over `lines`: ours first, then the references."""
  result = {
      "ours (tf.data)": lambda: time_ours(ours, lines, batch_size),
      f"HF {type(hf).__name__}": lambda: time_batches(
          lambda batch: hf(batch, add_special_tokens=False)["input_ids"], lines, batch_size),
      "HF Rust backend only": lambda: time_batches(
          lambda batch: [e.ids for e in hf.backend_tokenizer.encode_batch(
              batch, add_special_tokens=False)], lines, batch_size),
  }
  if kind == "sentencepiece":
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top
    from bert_jax.text import sentencepiece_vocab  # pylint: disable=g-import-not-at-top
    processor = spm.SentencePieceProcessor(
        model_file=sentencepiece_vocab.find_model_file(vocab))
    result["sentencepiece library only"] = lambda: time_batches(
        processor.encode, lines, batch_size)
  return result


def best_of_alternating(timed: dict, repeats: int) -> dict[str, tuple[int, float]]:
  """Name -> (pieces, best seconds); one warm-up each, then alternating timed runs."""
  for run in timed.values():
    run()  # Warm-up: graph tracing, thread pools.
  best = {}
  for _ in range(repeats):
    for name, run in timed.items():
      pieces, seconds = run()
      best[name] = (pieces, min(seconds, best.get(name, (0, float("inf")))[1]))
  return best


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data_dir", default=paths.default_data_dir())
  parser.add_argument("--kinds", default="wordpiece,bpe,sentencepiece")
  parser.add_argument("--max_lines", type=int, default=20000,
                      help="lines per corpus (default 20000)")
  parser.add_argument("--batch_size", type=int, default=1024)
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args(argv)
  if not args.data_dir or not os.path.isdir(args.data_dir):
    parser.error(f"no data root at {args.data_dir!r}; pass --data_dir")

  lines = [line for corpus in tokenizer_parity.corpus_lines(
      args.data_dir, args.max_lines).values() for line in corpus]
  print(f"{len(lines)} lines, batch {args.batch_size}, {os.cpu_count()} CPUs, "
        f"best of {args.repeats}")
  for kind in args.kinds.split(","):
    ours, hf, vocab = tokenizer_parity.ours_and_hf(kind, args.data_dir)
    results = best_of_alternating(
        runners(kind, ours, hf, vocab, lines, args.batch_size), args.repeats)
    names = list(results)
    ours_pieces, ours_seconds = results[names[0]]
    if results[names[1]][0] != ours_pieces:
      print(f"WARNING: piece counts differ: {results}")
    print(f"{kind} ({vocab}, {ours.vocab_size} pieces): {ours_pieces} pieces")
    for name, (pieces, seconds) in results.items():
      ratio = "" if name == names[0] else f"  (ours / this: {seconds / ours_seconds:.2f}x)"
      print(f"  {name:<30}{pieces / seconds:>12,.0f} tokens/s ({seconds:.2f} s){ratio}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
