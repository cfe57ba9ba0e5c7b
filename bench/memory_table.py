"""Per-device memory and FLOPs of BERT-Base/Large pretraining steps on 8 devices, no hardware.

  python bench/memory_table.py                  # every row (about 3 minutes on 2 cores)
  python bench/memory_table.py --models=large   # only BERT-Large's rows

Compiles the exact train step for each row on 8 simulated CPU devices, as
`python -m bert_jax.train --compile_only` does (bert_jax/run/compile_report.py). Rows vary the
mesh (data=8: params replicated; fsdp=8: params and optimizer state split 8 ways), the
remat policy (none; dots: keep every matmul output, the B x N x T x T attention scores
included; full: keep only each layer's input), the layer stack (loop: base's default;
scan: nn.scan, large's default) and the batch. It prints a markdown table: per-device params, optimizer state, XLA temporaries (activations and
workspace) and peak (arguments + outputs - donated + temporaries), in GiB; whether the peak
fits a 16 GiB accelerator; model TFLOPs per step (matmuls, 3x forward, no remat recompute)
and XLA's FLOP count summed over the devices (recompute included; n/a where the layers are
scanned, as XLA counts a loop body once). The last line is the JSON of every report.

Temporaries come from the XLA CPU compiler's buffer assignment; a TPU or GPU compiler fuses
and schedules differently, so read them as estimates, not guarantees. Note that on CPU remat
of an unrolled (loop) model recomputes (XLA's FLOPs grow) yet barely lowers the peak, the
CPU scheduler being free to run the recomputation early; under scan it cannot, so plan
with the scan rows.
"""
import argparse
import json
import os
import sys
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
_DEVICES = 8
_FLAGS = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _FLAGS:  # before jax is imported
  os.environ["XLA_FLAGS"] = f"{_FLAGS} --xla_force_host_platform_device_count={_DEVICES}"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from configs import base, large  # noqa: E402
from bert_jax.run import compile_report  # noqa: E402

GIB = 2 ** 30
HBM_GIB = 16
MESHES = {"data=8": dict(data=8, fsdp=1, tensor=1), "fsdp=8": dict(data=1, fsdp=8, tensor=1)}


class Row(NamedTuple):
  model: str      # configs/<model>.py
  seq: int
  batch: int      # global
  accum: int      # grad_accum_steps: micro-batches of batch / accum
  mesh: str       # a key of MESHES
  remat: str      # none, dots, full
  scan: bool      # layers under nn.scan (large's default) or a Python loop (base's)


ROWS = (
    Row("base", 128, 256, 1, "data=8", "none", False),
    Row("base", 128, 256, 1, "fsdp=8", "none", False),
    Row("base", 512, 256, 1, "data=8", "none", False),
    Row("base", 512, 256, 1, "fsdp=8", "none", False),
    Row("base", 512, 256, 1, "fsdp=8", "full", False),
    Row("base", 512, 256, 1, "fsdp=8", "dots", True),
    Row("base", 512, 256, 1, "fsdp=8", "full", True),
    Row("large", 128, 256, 1, "data=8", "dots", True),
    Row("large", 128, 256, 1, "fsdp=8", "none", True),
    Row("large", 128, 256, 1, "fsdp=8", "dots", True),
    Row("large", 512, 256, 1, "data=8", "dots", True),
    Row("large", 512, 256, 1, "fsdp=8", "dots", True),
    Row("large", 512, 256, 1, "fsdp=8", "full", True),
    Row("large", 512, 256, 4, "fsdp=8", "dots", True),
    Row("large", 512, 64, 1, "fsdp=8", "dots", True),
)
_CONFIGS = {"base": base.get_config, "large": large.get_config}


def row_config(row: Row):
  config = _CONFIGS[row.model](f"seq={row.seq}")
  config.data.batch_size = row.batch
  config.grad_accum_steps = row.accum
  config.model.remat_policy = row.remat
  config.model.scan_layers = row.scan
  config.mesh.update(MESHES[row.mesh])
  return config


def table_line(cells) -> str:
  return "| " + " | ".join(str(c) for c in cells) + " |"


def format_row(row: Row, report: dict) -> str:
  gib = lambda key: f"{report[key] / GIB:.2f}"  # noqa: E731
  xla = "n/a" if row.scan else f"{report['xla_flops_per_device'] * _DEVICES / 1e12:.1f}"
  batch = row.batch if row.accum == 1 else f"{row.batch} ({row.accum} x {row.batch // row.accum})"
  return table_line([
      row.model, row.seq, batch, row.mesh, row.remat, "scan" if row.scan else "loop",
      gib("params_bytes_per_device"), gib("opt_state_bytes_per_device"),
      gib("temp_bytes_per_device"), gib("peak_bytes_per_device"),
      "yes" if report["peak_bytes_per_device"] <= HBM_GIB * GIB else "no",
      f"{report['model_flops_per_step'] / 1e12:.1f}", xla])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--models", default="base,large", help="comma-separated: base, large")
  args = parser.parse_args()
  models = args.models.split(",")
  header = ["model", "seq", "global batch", "mesh", "remat", "layers", "params GiB/dev",
            "opt GiB/dev", "temp GiB/dev", "peak GiB/dev", f"fits {HBM_GIB} GiB",
            "model TFLOPs/step", "XLA TFLOPs/step"]
  print(table_line(header))
  print(table_line(["---"] * len(header)))
  reports = []
  for row in ROWS:
    if row.model not in models:
      continue
    report = compile_report.compile_report(row_config(row))
    reports.append({"row": row._asdict(), **report})
    print(format_row(row, report), flush=True)
  print("JSON: " + json.dumps(reports))


if __name__ == "__main__":
  main()
