r"""Pretraining input throughput on the real corpus, as a ratio to what a train step eats.

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

`--sweep` asks whether the stream keeps up with the chips it feeds: every masking scheme
(selectors.SELECTORS, on nsp_pairs rows) and every example builder (builders.BUILDERS,
with token masking), each timed twice in a child process, pinned to one core and to all of
this machine's cores (sched_setaffinity before TensorFlow starts, so tf.data sizes its
thread pools to them):

  python bench/input_pipeline.py --sweep --batch_size=64 --cache_dir=/tmp/sweep
  python bench/input_pipeline.py --sweep --batch_size=64 --cache_dir=/tmp/sweep \
      --max_seq_length=512 --max_predictions_per_seq=80 --builders=nsp_pairs,full_sentences

Per row: the stream's tokens inside an epoch (rows x T, padding counted, as the plan
counts a batch's tokens) a CPU-second of the 1-core run (its process time, all threads:
a figure that other jobs on the core do not lower) and a second of wall time on 1 and on
all cores; the epoch build's tokens a CPU-second (one epoch's rows x T over the process
time the numpy builder takes, which one thread a shard does in the background); and both
on the same cores, 1 / (1/stream + 1/build): what a core sustains when the build does not
overlap the masking. "phrase", "entity" and "mixture" read
span annotations; the sweep writes rule-made ones beside the corpus (entities: runs of
capitalised words; phrases: the other words in runs of up to three), which give the
masking its work, not ERNIE's annotations. Then, beside it, the tokens/s that one host
eats at the plan's bound for BERT-Base at that length (PLAN_HOSTS: the per-chip tokens/s of
bench/target_plan.py's recorded rows x the host's chips; an estimate, an upper one for
8 x H100 whose bound is the model's FLOPs alone), the share of it this machine's cores
make, and how many cores at the slowest and fastest row's tokens per CPU-second feed it. The machine's CPU and load average
(/proc/loadavg) come first; the last line is the rows' JSON.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax/

from bert_jax.text import paths  # noqa: E402
from bert_jax.text import prepare  # noqa: E402
from bert_jax.pretrain import builders  # noqa: E402
from bert_jax.pretrain import pipeline as pretraining  # noqa: E402
from bert_jax.pretrain import selectors  # noqa: E402
from bert_jax.text import spans as spans_lib  # noqa: E402
from bert_jax.text.tokenizers import make_tokenizer  # noqa: E402

_STEPS_BEFORE_BOUNDARY = 150
_WARM_UP_BATCHES = 50  # more than the map and prefetch buffers hold
_SPAN_SCHEMES = ("phrase", "entity", "mixture")  # masking schemes that read span files
_MIXTURE = "token:1,phrase:1,entity:1"  # ERNIE's three levels (configs/ernie.py)

# Tokens/s per chip at the plan's bound for BERT-Base, global batch 256 (bench/
# target_plan.py; the rows docs/results/scaling.md records, with their commits), and the
# chips of one host: (host, chips, {seq: tokens/s per chip}, the plan's target and commit).
PLAN_HOSTS = (
    ("TPU v5e host", 4, {128: 82_623, 512: 100_926}, "tpu:v5e-16 at f32b1c4"),
    ("TPU v5p host", 4, {128: 592_917, 512: 780_716}, "tpu:v5p-8 at 6bbd14e"),
    ("8 x H100 host (at most)", 8, {128: 1_814_034, 512: 1_682_196}, "gpu:h100x8 at 52af2b9"),
)


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


def write_rule_spans(text_path: str) -> None:
  """A span file beside a plain-format file (text/spans.py's format), by a rule: each run
  of capitalised words an entity; the other words in phrases of up to three."""
  with open(text_path, encoding="utf-8") as text, open(
      spans_lib.span_path(text_path), "w", encoding="utf-8") as out:
    for line in text:
      spans, start = [], None
      words = line.split()
      for i, word in enumerate(words + [""]):
        if word[:1].isupper():
          start = i if start is None else start
          continue
        if start is not None:
          spans.append([start, i, "entity"])
          start = None
      covered = {i for s, e, _ in spans for i in range(s, e)}
      plain = [i for i in range(len(words)) if i not in covered]
      run = []
      for i in plain + [None]:
        if run and (i is None or i != run[-1] + 1 or len(run) == 3):
          spans.append([run[0], run[-1] + 1, "phrase"])
          run = []
        if i is not None:
          run.append(i)
      out.write(json.dumps({"spans": spans}) + "\n")


def sweep_config(args, corpus_path: str, masking: str, builder: str):
  """config.data for one row of the sweep."""
  config = pretraining.default_data_config()
  config.update(dict(train_files=(os.path.abspath(corpus_path),), batch_size=args.batch_size,
                     max_seq_length=args.max_seq_length,
                     max_predictions_per_seq=args.max_predictions_per_seq, masking=masking,
                     example_builder=builder, spans=masking in _SPAN_SCHEMES,
                     masking_mixture=_MIXTURE if masking == "mixture" else "",
                     cache_dir=args.cache_dir))
  return config


def time_stream(config, batches: int) -> dict:
  """One row: the stream's and the epoch build's tokens a second of wall time and a
  CPU-second of this process (all its threads; module docstring)."""
  tokenizer = make_tokenizer(config)
  corpora, _ = pretraining.load_corpora(config, tokenizer)
  train_input = pretraining.PretrainingInput(corpora, tokenizer, config)
  wall, cpu = time.perf_counter(), time.process_time()
  steps = train_input.steps_in_epoch(0)
  build_wall, build_cpu = time.perf_counter() - wall, time.process_time() - cpu
  consume(train_input, 1)  # opens epoch 0 and starts building epoch 1 in the background
  train_input.steps_in_epoch(1)  # wait for that build, so it does not share the clock
  # Warm-up: the batches tf.data made ahead while the build ran are drained first.
  consume(train_input, _WARM_UP_BATCHES)
  timed = max(1, min(batches, steps - _WARM_UP_BATCHES - 10))
  wall, cpu = time.perf_counter(), time.process_time()
  consume(train_input, timed)
  stream_wall, stream_cpu = time.perf_counter() - wall, time.process_time() - cpu
  seq, batch = int(config.max_seq_length), int(config.batch_size)
  streamed, built = timed * batch * seq, steps * batch * seq
  stream, build = streamed / stream_cpu, built / build_cpu
  return {"masking": config.masking, "builder": config.example_builder,
          "stream_tokens_per_s": streamed / stream_wall, "build_tokens_per_s":
          built / build_wall, "stream_tokens_per_cpu_s": stream,
          "build_tokens_per_cpu_s": build, "both_tokens_per_cpu_s": 1 / (1 / stream + 1 / build),
          "epoch_rows": steps * batch}


def sweep_rows(args) -> list[tuple[str, str]]:
  """(masking, builder): every scheme on the first builder, every builder with the first
  scheme (a scheme's masking cost barely depends on the builder, nor the other way)."""
  schemes = args.schemes.split(",") if args.schemes else list(selectors.SELECTORS)
  names = args.builders.split(",") if args.builders else list(builders.BUILDERS)
  for name in schemes:
    if name not in selectors.SELECTORS:
      raise ValueError(f"--schemes: {name!r} is not one of {sorted(selectors.SELECTORS)}")
  for name in names:
    builders.get(name)
  return [(m, names[0]) for m in schemes] + [(schemes[0], b) for b in names[1:]]


def sweep_child(args) -> None:
  """Pinned to --cpus cores before TensorFlow starts; prints the rows' JSON."""
  cores = sorted(os.sched_getaffinity(0))
  os.sched_setaffinity(0, cores[:args.cpus or len(cores)])
  results = [time_stream(sweep_config(args, args.corpus, m, b), args.batches)
             for m, b in sweep_rows(args)]
  print(json.dumps(results))


def machine() -> str:
  """This CPU's model and core count, and the load average now (/proc/loadavg)."""
  with open("/proc/cpuinfo") as f:
    model = next((line.split(":", 1)[1].strip() for line in f if line.startswith(
        "model name")), "unknown CPU")
  with open("/proc/loadavg") as f:
    load = " ".join(f.read().split()[:3])
  return f"{model}, {len(os.sched_getaffinity(0))} cores, load average {load}"


def _corpus_copy(source: str | None, workspace: str) -> str:
  """The sweep's corpus in `workspace` (prepared there when `source` is None) with its
  rule-made span file beside it; an existing copy of the same text is kept as it is, so
  the tokenized corpora cached beside it stay valid."""
  corpus_path = os.path.join(workspace, "corpus.txt")
  if source is None:
    if not os.path.exists(corpus_path):
      prepare.prepare(list(prepare.PRETRAINING_SOURCES), corpus_path,
                      paths.default_data_dir())
  else:
    with open(source, encoding="utf-8") as f:
      text = f.read()
    if not os.path.exists(corpus_path) or open(corpus_path, encoding="utf-8").read() != text:
      with open(corpus_path, "w", encoding="utf-8") as copy:
        copy.write(text)
  if not os.path.exists(spans_lib.span_path(corpus_path)) or (
      os.path.getmtime(spans_lib.span_path(corpus_path)) < os.path.getmtime(corpus_path)):
    write_rule_spans(corpus_path)
  return corpus_path


def run_sweep(args) -> None:
  sweep_rows(args)  # a bad name fails before the corpus is prepared
  with tempfile.TemporaryDirectory() as scratch:
    workspace = args.cache_dir or scratch
    os.makedirs(workspace, exist_ok=True)
    corpus_path = _corpus_copy(args.corpus, workspace)
    all_cores = len(os.sched_getaffinity(0))
    print(f"machine: {machine()}", flush=True)
    per_cpus = {}
    for cpus in (1, all_cores):
      command = [sys.executable, os.path.abspath(__file__), "--sweep_child",
                 f"--cpus={cpus}", f"--corpus={corpus_path}",
                 f"--cache_dir={os.path.join(workspace, 'cache')}",
                 *[f"--{k}={getattr(args, k)}" for k in (
                     "batch_size", "max_seq_length", "max_predictions_per_seq", "batches",
                     "schemes", "builders")]]
      out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
      per_cpus[cpus] = json.loads(out.strip().splitlines()[-1])
    print(f"machine after: {machine()}")
  print(sweep_table(args, per_cpus[1], per_cpus[all_cores], all_cores))
  print(host_table(args.max_seq_length, per_cpus[1], per_cpus[all_cores], all_cores))
  print(json.dumps({"cores_1": per_cpus[1], f"cores_{all_cores}": per_cpus[all_cores]}))


def _k(value: float) -> str:
  return f"{value / 1e3:,.0f}k"


def sweep_table(args, one: list[dict], every: list[dict], cores: int) -> str:
  head = ["masking", "builder", "stream tokens/CPU-s", "build tokens/CPU-s",
          "both tokens/CPU-s", "stream tokens/s, 1 core", f"stream tokens/s, {cores} cores"]
  lines = [f"seq {args.max_seq_length}, {args.max_predictions_per_seq} predictions a row, "
           f"batch {args.batch_size}; per CPU-second: the 1-core run's",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for a, b in zip(one, every):
    cells = [a["masking"], a["builder"], _k(a["stream_tokens_per_cpu_s"]),
             _k(a["build_tokens_per_cpu_s"]), _k(a["both_tokens_per_cpu_s"]),
             _k(a["stream_tokens_per_s"]), _k(b["stream_tokens_per_s"])]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def host_table(seq: int, one: list[dict], every: list[dict], cores: int) -> str:
  """What a host eats at the plan's bound beside what the stream makes here: the cores a
  host needs at the stream's tokens per CPU-second (masking and build on the same cores)."""
  rate = {r["masking"] + "/" + r["builder"]: r["both_tokens_per_cpu_s"] for r in one}
  here = {r["masking"] + "/" + r["builder"]: r["stream_tokens_per_s"] for r in every}
  slowest, fastest = min(rate, key=rate.get), max(rate, key=rate.get)
  head = ["host", "chips", "tokens/s per host at the bound (estimate)", "plan row",
          f"{cores} cores here: the stream's tokens/s ({slowest} .. {fastest})",
          f"cores it needs ({slowest} .. {fastest})"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for host, chips, per_chip, source in PLAN_HOSTS:
    if seq not in per_chip:
      continue
    eats = per_chip[seq] * chips
    cells = [host, str(chips), f"{eats:,.0f}", source,
             f"{_k(here[slowest])} .. {_k(here[fastest])} ({here[slowest] / eats:.1%} .. "
             f"{here[fastest] / eats:.1%})",
             f"{eats / rate[slowest]:,.1f} .. {eats / rate[fastest]:,.1f}"]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


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
  parser.add_argument("--sweep", action="store_true",
                      help="every masking scheme and example builder on 1 core and on all, "
                      "beside the plan's tokens/s per host (module docstring)")
  parser.add_argument("--schemes", default="", help="--sweep: masking schemes (default all)")
  parser.add_argument("--builders", default="",
                      help="--sweep: example builders (default all; the first one carries "
                      "the schemes)")
  parser.add_argument("--sweep_child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--cpus", type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument("--cache_dir", default="",
                      help="--sweep: keep the corpus copy, its span file and the tokenized "
                      "corpora here for the next sweep (default: a temporary folder)")
  args = parser.parse_args()
  if args.sweep_child:
    return sweep_child(args)
  if args.sweep:
    return run_sweep(args)

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
