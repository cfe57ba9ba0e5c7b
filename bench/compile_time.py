"""Compile time of the pretraining step, layers unrolled (a Python loop) vs scanned (nn.scan).

  python bench/compile_time.py                          # BERT-Base, ModernBERT-, ALBERT-base
  python bench/compile_time.py --models=modernbert-base --seq=512

For each model, compiles the exact train step twice from abstract shapes, as
`python -m bert_jax.train --compile_only` does (bert_jax/run/compile_report.py; nothing is
allocated, one device): once with `model.scan_layers=False`, once with True (ModernBERT's
layer 0 stays unrolled, its other layers are stacked; ALBERT's one shared layer is scanned
with its params as they are). Prints a markdown table: seconds to trace, lower and compile
each (after one untimed warm-up compile of a 1-layer model), the unrolled / scanned ratio,
and XLA's temporaries (GiB) per layout. Needs the WordPiece vocabulary of ../shared/data
(BERT), the main job's byte-level BPE (runs/corpus/bpe-8k, ModernBERT) and
configs/albert.py's SentencePiece vocabulary (runs/corpus/spm-8k); the host is printed
with the table.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402

from bert_jax.run import compile_report, run_report  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402
from configs import albert, base, modernbert  # noqa: E402

GIB = 2 ** 30


def bert_base(seq: int, batch: int):
  config = base.get_config(f"seq={seq}")
  config.data.batch_size = batch
  return config


def modernbert_base(seq: int, batch: int):
  config = modernbert.get_config()
  config.model.update(config_for_size("modernbert-base", vocab_size=8192,
                                      pad_token_id=1).to_json_dict())
  config.data.max_seq_length = seq
  config.data.max_predictions_per_seq = round(seq * modernbert.MASKED_LM_PROB)
  config.data.batch_size = batch
  return config


def albert_base(seq: int, batch: int):
  config = albert.get_config()
  config.model.update(config_for_size("albert-base-v2", vocab_size=8192).to_json_dict())
  config.model.projection_init = "fan_in"
  config.data.max_seq_length = seq
  config.data.batch_size = batch
  return config


MODELS = {"bert-base": bert_base, "modernbert-base": modernbert_base, "albert-base": albert_base}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--models", default="bert-base,modernbert-base,albert-base",
                      help=f"comma-separated, of {sorted(MODELS)}")
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--batch", type=int, default=8)
  args = parser.parse_args()
  print(f"{run_report.device_description()}, seq {args.seq}, batch {args.batch}")
  # Warm-up, not timed: the first compile of a process also pays JAX's and XLA's start-up.
  warm = MODELS["bert-base"](args.seq, args.batch)
  warm.model.update(num_hidden_layers=1, hidden_size=64, intermediate_size=128,
                    num_attention_heads=2)
  compile_report.compile_report(warm)
  print("| model | layers | unrolled: compile s | scanned: compile s | unrolled / scanned "
        "| temporaries GiB, unrolled / scanned |")
  print("|---|---|---|---|---|---|")
  for name in args.models.split(","):
    reports = {}
    for scan in (False, True):
      config = MODELS[name](args.seq, args.batch)
      config.model.scan_layers = scan
      reports[scan] = compile_report.compile_report(config)
    unrolled, scanned = reports[False], reports[True]
    print(f"| {name} | {config.model.num_hidden_layers} | {unrolled['compile_seconds']:.1f} | "
          f"{scanned['compile_seconds']:.1f} | "
          f"{unrolled['compile_seconds'] / scanned['compile_seconds']:.2f}x | "
          f"{unrolled['temp_bytes_per_device'] / GIB:.2f} / "
          f"{scanned['temp_bytes_per_device'] / GIB:.2f} |", flush=True)


if __name__ == "__main__":
  main()
