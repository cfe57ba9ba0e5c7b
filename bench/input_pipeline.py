"""Pretraining input throughput on the real corpus, as a ratio to what a train step eats.

  python bench/input_pipeline.py                        # prepares the corpus in a temp dir
  python bench/input_pipeline.py --corpus=workdirs/corpus/pretrain.txt --batches=600

Times, on the prepared real corpus (all PRETRAINING_SOURCES of bert_jax.text.prepare):
  prepare_s          raw sources -> plain format (skipped with --corpus)
  load_s             tokenizing the corpus once (tf.data, in-graph WordPiece)
  epoch_build_s      one epoch's NSP pairs, shuffled and packed (numpy)
  examples_per_s     steady state inside an epoch: masking in tf.data, numpy batches out
  boundary_wait_ms   a simulated trainer (sleeping --step_ms per batch) crosses an epoch
                     boundary: mean / max time it waits for a batch (the next epoch's pairs
                     are built in a background thread while the current one is consumed)
  ratio              examples_per_s / (batch_size / --step_ms): how many times faster the
                     input is than a train step of --step_ms consumes (the issue asks >= 10)
The last line is one JSON object with these numbers.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax/

from bert_jax.text import paths  # noqa: E402
from bert_jax.text import prepare  # noqa: E402
from bert_jax.pretrain import pipeline as pretraining  # noqa: E402
from bert_jax.text.tokenizers import make_tokenizer  # noqa: E402

_STEPS_BEFORE_BOUNDARY = 150


def consume(train_input, num_batches: int) -> float:
  """Examples per second over `num_batches` batches."""
  start, examples = time.perf_counter(), 0
  for _ in range(num_batches):
    examples += len(next(train_input)["input_ids"])
  return examples / (time.perf_counter() - start)


def simulated_training_waits(train_input, num_batches: int, step_ms: float) -> list[float]:
  """Seconds spent waiting for each batch by a loop whose steps take step_ms."""
  waits = []
  for _ in range(num_batches):
    start = time.perf_counter()
    next(train_input)
    waits.append(time.perf_counter() - start)
    time.sleep(step_ms / 1000.0)
  return waits


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--corpus", help="a plain-format file; default: prepare one now")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--max_predictions_per_seq", type=int, default=20)
  parser.add_argument("--batches", type=int, default=400, help="batches timed per phase")
  parser.add_argument("--masking", default="token", help="a name in selectors.SELECTORS")
  parser.add_argument("--step_ms", type=float, default=20.0,
                      help="train step time to compare against (tiny model, batch 32x128)")
  args = parser.parse_args()

  results = {}
  with tempfile.TemporaryDirectory() as scratch:
    corpus_path = args.corpus
    if corpus_path is None:
      corpus_path = os.path.join(scratch, "pretrain.txt")
      start = time.perf_counter()
      prepare.prepare(list(prepare.PRETRAINING_SOURCES), corpus_path, paths.default_data_dir())
      results["prepare_s"] = time.perf_counter() - start

    config = pretraining.default_data_config()
    config.update(dict(train_files=(os.path.abspath(corpus_path),),
                       batch_size=args.batch_size, max_seq_length=args.max_seq_length,
                       max_predictions_per_seq=args.max_predictions_per_seq,
                       masking=args.masking))
    tokenizer = make_tokenizer(config)
    start = time.perf_counter()
    corpora, _ = pretraining.load_corpora(config, tokenizer)
    corpus = corpora[0]
    results["load_s"] = time.perf_counter() - start

    train_input = pretraining.PretrainingInput(corpora, tokenizer, config)
    start = time.perf_counter()
    steps = train_input.steps_in_epoch(0)
    results["epoch_build_s"] = time.perf_counter() - start
    consume(train_input, 1)  # opens epoch 0 and starts building epoch 1 in the background
    train_input.steps_in_epoch(1)  # wait for that build, so it does not share the clock
    consume(train_input, 20)  # warm-up
    results["examples_per_s"] = consume(train_input, min(args.batches, steps - 40))

    boundary_input = pretraining.PretrainingInput(corpora, tokenizer, config)
    boundary_input.steps_in_epoch(0)  # same pairs as above; built before the clock starts
    boundary_state = boundary_input.state()
    boundary_state["shards"]["0"]["step_in_epoch"] = steps - _STEPS_BEFORE_BOUNDARY - 1
    boundary_input.restore(boundary_state)
    next(boundary_input)  # opening an epoch mid-way (a restore) is not what is timed here
    waits = simulated_training_waits(boundary_input, 2 * _STEPS_BEFORE_BOUNDARY, args.step_ms)
    results["boundary_wait_ms_mean"] = 1000 * sum(waits) / len(waits)
    results["boundary_wait_ms_max"] = 1000 * max(waits)

  consumed_per_s = args.batch_size / (args.step_ms / 1000.0)
  results["ratio"] = results["examples_per_s"] / consumed_per_s
  print(f"corpus: {corpus.num_documents} documents, {corpus.num_sentences} sentences, "
        f"{corpus.num_tokens} tokens; epoch 0: {steps} batches of {args.batch_size}")
  for key, value in results.items():
    print(f"{key:24s} {value:10.2f}")
  print(f"a {args.step_ms:g} ms step eats {consumed_per_s:.0f} examples/s; the input makes "
        f"{results['ratio']:.1f}x that")
  print(json.dumps({key: round(value, 3) for key, value in results.items()}))


if __name__ == "__main__":
  main()
