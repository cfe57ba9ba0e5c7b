r"""The compile-only memory plan of a pretraining step per attention implementation.

  python bench/attention_memory.py                              # BERT-Base, batch 8 x 512
  python bench/attention_memory.py --size=mini --batch=32 --seq=128 --impls=einsum,xla

Compiles the exact train step (bert_jax/run/compile_report.py, as `bert_jax.train
--compile_only` does; nothing is allocated) once per `config.model.attention_impl` and
prints XLA's per-device temporaries (activations and workspace) and peak beside the
einsum path's. The fused paths run without attention-probability dropout (they have
none), so every row here sets attention_probs_dropout_prob=0, the einsum row included.
Which paths compile depends on the backend: einsum and xla anywhere, cudnn on an NVIDIA
GPU (bfloat16: pass --dtype=bfloat16), splash on TPU (off TPU it runs Pallas's
interpreter, whose memory says nothing about the kernel, so it is skipped there). On CPU
the xla path is the same math as einsum (its B x N x T x T scores are materialised too);
the saving is the fused kernels', on the accelerators.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402

from bert_jax.run import compile_report  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402
from configs import base  # noqa: E402

GIB = 2 ** 30
RUNS_ON = {"einsum": ("cpu", "gpu", "tpu"), "xla": ("cpu", "gpu", "tpu"), "cudnn": ("gpu",),
           "splash": ("tpu",)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="base")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=512)
  parser.add_argument("--dtype", default="float32")
  parser.add_argument("--impls", default="einsum,xla,cudnn,splash")
  args = parser.parse_args()
  platform = jax.devices()[0].platform
  print(f"{args.size} pretraining step (MLM + NSP), batch {args.batch} x seq {args.seq}, "
        f"{args.dtype}, {jax.device_count()} {platform} device(s); XLA compiler estimates")
  print("| attention_impl | temporaries (GiB) | peak (GiB) | temporaries vs einsum |")
  print("|---|---|---|---|")
  einsum_temp = None
  for impl in args.impls.split(","):
    if platform not in RUNS_ON[impl]:
      print(f"| {impl} | - | - | not on {platform} (runs on {', '.join(RUNS_ON[impl])}) |")
      continue
    config = base.get_config()
    config.model.update(config_for_size(args.size).to_json_dict())
    config.model.update(attention_impl=impl, attention_probs_dropout_prob=0.0,
                        dtype=args.dtype, max_position_embeddings=max(512, args.seq))
    config.data.batch_size, config.data.max_seq_length = args.batch, args.seq
    config.data.max_predictions_per_seq = max(1, round(args.seq * 0.15))
    report = compile_report.compile_report(config)
    temp, peak = report["temp_bytes_per_device"], report["peak_bytes_per_device"]
    einsum_temp = temp if impl == "einsum" else einsum_temp
    ratio = f"{temp / einsum_temp:.2f}x" if einsum_temp else "-"
    print(f"| {impl} | {temp / GIB:.3f} | {peak / GIB:.3f} | {ratio} |", flush=True)


if __name__ == "__main__":
  main()
