"""Prints the README's fine-tuning results table from runs/finetune/*.json.

  python experiments/results_table.py [--runs=runs/finetune]

Each JSON is written by experiments/finetune_minilm.sh: the command, its wall time
(set-up, data, compile, training and evaluation), and eval_results.json.
"""
import argparse
import glob
import json
import os

# eval_results.json keys shown per run, in this order, when present.
_SCORES = ("eval_accuracy", "eval_f1", "eval_matthews_corrcoef", "eval_pearson",
           "eval_spearman", "eval_exact_match", "eval_exact", "eval_best_f1",
           "eval_best_null_threshold")


def row(path: str) -> str:
  with open(path) as f:
    run = json.load(f)
  results = run["results"]
  # SQuAD's official script reports EM/F1 in 0-100 (its runs carry eval_total, the
  # question count); every other metric here is a fraction.
  scale = 1 if "eval_total" in results else 100
  scores = ", ".join(f"{key[len('eval_'):]} {scale * results[key]:.2f}"
                     if "threshold" not in key else f"{key[len('eval_'):]} {results[key]:.2f}"
                     for key in _SCORES if key in results)
  minutes = run["wall_seconds"] / 60
  speed = results.get("train_examples_per_sec", float("nan"))
  name = os.path.splitext(os.path.basename(path))[0]
  return (f"| {name} | {scores} | {results['step']} | {minutes:.1f} min | {speed:.1f} | "
          f"`{run['command']}` |")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", default="runs/finetune")
  args = parser.parse_args()
  paths = sorted(glob.glob(os.path.join(args.runs, "*.json")))
  if not paths:
    raise SystemExit(f"no runs in {args.runs}: run experiments/finetune_minilm.sh first")
  print("| run | eval scores (%) | steps | wall time | train examples/s | command |")
  print("|---|---|---|---|---|---|")
  for path in paths:
    print(row(path))


if __name__ == "__main__":
  main()
