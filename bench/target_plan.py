r"""The plan to read before renting accelerators: per-chip memory from the target's own
compiler, the largest batch that fits, and a roofline bound on the step time.

  pip install -r requirements-targets.txt --target ~/targets   # libtpu, jax-cuda12-plugin
  PYTHONPATH=~/targets JAX_PLATFORMS=cpu python bench/target_plan.py            # every row
  PYTHONPATH=~/targets JAX_PLATFORMS=cpu python bench/target_plan.py \
      --rows=base --targets=tpu:v5e-16 --max_batch     # with the largest batch
  python bench/target_plan.py --dry        # tiny model, this machine's CPU devices

Each row compiles the exact pretraining train step (bf16 compute, fp32 params and Adam
state; splash attention on TPUs, cuDNN's flash attention on GPUs where cuDNN is installed,
else XLA's: the row's JSON says which) for a TPU slice or GPU node described
without the hardware (bert_jax/run/targets.py) and prints one markdown table:

  compiler facts   per-chip peak bytes (arguments + outputs - donated + temporaries) from
                   the target compiler's memory analysis; its FLOPs and bytes accessed per
                   chip (TPU only: XLA's GPU compiler has no cost analysis); with
                   --max_batch, the largest global batch whose compile fits the chip's HBM
                   (a multiple of the batch-sharding size, bracketed by a compile that
                   fits and one that does not; regula falsi on the peak, two to four
                   compiles when the peak is linear in the batch, bisection where the
                   compiler rematerialises to fit and the peak bends: 8-12 compiles
                   to within 5% with --max_batch_tolerance=0.05); a step the TPU
                   compiler refuses for want of HBM is a row that does not fit;
  published        the chip's HBM, bf16 peak FLOP/s and HBM bandwidth (CHIPS below);
  estimates        the roofline bound = max(FLOPs / peak, bytes / bandwidth) per step,
                   FLOPs the larger of the compiler's count and the model's (the TPU
                   compiler's has been the smaller; on GPUs it gives none, so the
                   bound is the model's FLOPs / peak alone: a lower bound), the MFU
                   ceiling it allows (model FLOPs / chips / peak / bound, at most 100%)
                   and tokens/s per chip at it.

The bound ignores communication between chips and kernel launch overheads; it says how
fast a step can be, not how fast it is (bench/device_check.sh measures that). The JSON of
every row is the last line.

`--recipes` plans the family configs' paper-scale recipes instead, with the hours and
chip-hours of each paper's token budget at the bound; their rows, budgets and table are
bench/recipe_plan.py's (its docstring says what each row compiles). With `--max_batch` a
recipe's row is planned at the largest micro-batch that fits and divides the paper's batch
(the fewest accumulation steps: recipe_plan.fewest_accumulation), beside its own:

  PYTHONPATH=~/targets JAX_PLATFORMS=cpu python bench/target_plan.py --recipes \
      --rows=modernbert --targets=tpu:v5p-8 --max_batch

A row is anything with a target, a mesh, a global batch, config(batch) (the config to
compile) and budget() (what else the plan holds: a recipe's token budget, which gets its
hours at the bound): Row here, recipe_plan.RecipeRow there. recipe_plan imports this
module at its top; this one imports recipe_plan only inside main(), for --recipes, so
neither module is ever imported half-built.
"""
import argparse
import dataclasses
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # recipe_plan (--recipes)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bert_jax.core import flops  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402
from bert_jax.run import compile_report  # noqa: E402
from configs import base  # noqa: E402

GIB = 2 ** 30


@dataclasses.dataclass(frozen=True)
class Chip:
  hbm_bytes: int
  hbm_bytes_per_s: float
  source: str


# Published per-chip HBM capacity and bandwidth, by device kind (a substring of it).
CHIPS = {
    "TPU v4": Chip(32 * GIB, 1200e9, "cloud.google.com/tpu/docs/v4"),
    "TPU v5 lite": Chip(16 * GIB, 819e9, "cloud.google.com/tpu/docs/v5e"),
    "TPU v5p": Chip(95 * GIB, 2765e9, "cloud.google.com/tpu/docs/v5p"),
    "TPU v5": Chip(95 * GIB, 2765e9, "cloud.google.com/tpu/docs/v5p"),
    "TPU v6 lite": Chip(32 * GIB, 1640e9, "cloud.google.com/tpu/docs/v6e"),
    "H100": Chip(80 * 10 ** 9, 3.35e12, "NVIDIA H100 SXM5 datasheet"),
    "A100": Chip(80 * 10 ** 9, 2.039e12, "NVIDIA A100 80GB SXM datasheet"),
    "H200": Chip(141 * 10 ** 9, 4.8e12, "NVIDIA H200 SXM datasheet"),
}

# The fused attention of each platform: splash on TPUs; on GPUs cuDNN's flash attention
# where cuDNN is installed (requirements-targets.txt), else XLA's (which materialises the
# [B, N, T, T] scores).
def _installed(name: str) -> bool:
  try:
    return importlib.util.find_spec(name) is not None
  except ModuleNotFoundError:  # its parent package ("nvidia") is not installed
    return False


ATTENTION = {"tpu": "splash", "host": "xla",
             "gpu": "cudnn" if _installed("nvidia.cudnn") else "xla"}


def fused_attention(target: str, dtype: str | None = "bfloat16") -> str:
  """The fused attention a model computing in `dtype` takes on `target`: ATTENTION's, but
  XLA's where cuDNN's would get float32 (its flash kernel runs in float16/bfloat16 only)."""
  impl = ATTENTION[target.split(":")[0]]
  if impl == "cudnn" and str(dtype or "float32") not in ("bfloat16", "float16"):
    return "xla"
  return impl

# Model sizes beyond bert_jax.models.config.SIZES: the papers' largest members.
EXTRA_SIZES = {
    "albert-xxlarge": dict(config_for_size("albert-base-v2").to_json_dict(), hidden_size=4096,
                           num_attention_heads=64, intermediate_size=16384,
                           embedding_size=128),
    "electra-large": dict(config_for_size("large").to_json_dict(), family="electra"),
}


@dataclasses.dataclass(frozen=True)
class Row:
  model: str   # a SIZES or EXTRA_SIZES name
  seq: int
  batch: int   # global
  target: str  # bert_jax.run.targets name
  mesh: str    # "fsdp=16", "data=2,fsdp=4"

  def config(self, batch: int | None = None):
    """What plan compiles: row_config(self, batch)."""
    return row_config(self, batch)

  def budget(self) -> dict:
    """What plan adds beside the compile report: nothing (a recipe row adds its budget)."""
    return {}


def _rows():
  rows = []
  tpus = (("tpu:v4-8", "fsdp=4"), ("tpu:v5e-16", "fsdp=16"), ("tpu:v5p-8", "fsdp=4"),
          ("tpu:v6e-8", "fsdp=8"))
  for model in ("base", "large"):
    for seq in (128, 512):
      for target, mesh in (*tpus, ("gpu:h100x8", "fsdp=8")):
        rows.append(Row(model, seq, 256, target, mesh))
  for seq in (512, 8192):
    for target, mesh in (("tpu:v5p-8", "fsdp=4"), ("gpu:h100x8", "fsdp=8")):
      rows.append(Row("modernbert-base", seq, 256 if seq == 512 else 16, target, mesh))
  rows.append(Row("albert-xxlarge", 512, 256, "tpu:v6e-8", "fsdp=8"))
  rows.append(Row("electra-large", 512, 256, "tpu:v5p-8", "fsdp=4"))
  return tuple(rows)


ROWS = _rows()


def row_config(row: Row, batch: int | None = None):
  """configs/base.py with the row's model, shapes and mesh; bf16 compute."""
  config = base.get_config()
  fields = EXTRA_SIZES.get(row.model) or config_for_size(row.model).to_json_dict()
  config.model = dict(fields, dtype="bfloat16", max_position_embeddings=max(
      fields.get("max_position_embeddings", 512), row.seq),
      attention_impl=fused_attention(row.target),
      attention_probs_dropout_prob=0.0)
  config.data.max_seq_length = row.seq
  config.data.max_predictions_per_seq = max(1, round(0.15 * row.seq))
  config.data.batch_size = batch or row.batch
  for axis in ("data", "fsdp", "tensor"):
    config.mesh[axis] = 1
  for part in row.mesh.split(","):
    axis, size = part.split("=")
    config.mesh[axis] = int(size)
  if config.model.get("family", "bert") not in ("bert", "albert", "ernie"):
    config.objectives = "mlm"  # a member without NSP / SOP
  return config


def chip_of(device_kind: str) -> Chip | None:
  return next((chip for name, chip in CHIPS.items() if name.lower() in device_kind.lower()),
              None)


def plan(row: Row, batch: int | None = None) -> dict:
  """The compile report of row.config(batch) (a Row or a recipe_plan.RecipeRow), row.budget()
  and the roofline estimates: the bound, and the hours a token budget takes at it."""
  config = row.config(batch)
  report = compile_report.compile_report(config, row.target)
  chip, peak = chip_of(report["device_kind"]), flops.peak_flops(report["device_kind"])
  out = {"row": dataclasses.asdict(row),
         "attention_impl": config.model.get("attention_impl", "einsum"), **report,
         **row.budget()}
  if chip is None or peak is None:
    return out
  if "out_of_memory" in report:  # refused by the TPU compiler: no memory or cost analysis
    out.update(hbm_bytes=chip.hbm_bytes, hbm_source=chip.source, peak_flops=peak, fits=False)
    return out
  devices = report["devices"]
  # The chip does at least the model's matmul FLOPs (bert_jax.core.flops) and at least what its
  # compiler counts. The TPU compiler has counted fewer in every row so far (BERT-Base at
  # 128 tokens 0.8 of 1.1 TFLOP per chip, ALBERT-xxlarge 16% fewer; its cost analysis does
  # not see inside custom kernels such as splash attention, which explains a few percent
  # of that, not all): the larger is the tighter lower bound, and it keeps the MFU ceiling
  # at or below 100%.
  model_per_device = report["model_flops_per_step"] / devices
  flops_counted = max(report["xla_flops_per_device"] or 0.0, model_per_device)
  flop_s = flops_counted / peak
  byte_s = (report["xla_bytes_accessed_per_device"] or 0.0) / chip.hbm_bytes_per_s
  bound = max(flop_s, byte_s)
  out.update(hbm_bytes=chip.hbm_bytes, hbm_source=chip.source, peak_flops=peak,
             fits=report["peak_bytes_per_device"] <= chip.hbm_bytes, bound_seconds=bound,
             bound_from="bytes" if byte_s > flop_s else (
                 "compiler flops" if flops_counted > model_per_device else "model flops"),
             bound_is_lower="xla_flops_per_device" not in report or
             report["xla_flops_per_device"] is None,
             mfu_ceiling=report["model_flops_per_step"] / devices / peak / bound,
             tokens_per_s_per_chip=report["global_batch"] * report["seq_len"] / devices / bound)
  if "budget_tokens" in out:  # at the bound: a lower bound on the time, as the bound is
    out["budget_hours"] = out["budget_tokens"] / (out["tokens_per_s_per_chip"] * devices) / 3600
    out["budget_chip_hours"] = out["budget_hours"] * devices
  return out


def _bent(peaks: dict, low: int, high: int) -> bool:
  """Whether the peak bends between the fits and the bracket's miss: the slope through the
  two largest fits under half the slope from the largest fit to the miss (the compiler
  rematerialising to fit, or a layout it switches), where the line would keep landing
  just above the fit. No line without both ends' peaks (a given bracket): bent."""
  if low not in peaks or high not in peaks:
    return True
  fits_below = sorted(b for b in peaks if b <= low)
  if len(fits_below) < 2:
    return False
  a, b = fits_below[-2:]
  return (peaks[b] - peaks[a]) / (b - a) < 0.5 * (peaks[high] - peaks[low]) / (high - low)


def largest_batch(row: Row, first: dict, multiple: int, cap: int = 1 << 16,
                  tolerance: float = 0.0, bracket: tuple[int, int] | None = None,
                  trail: list | None = None) -> tuple[int | None, int | None]:
  """(the largest global batch found whose compile fits the chip, the smallest found whose
  compile does not): batches are multiples of `multiple` up to `cap`; (None, m) when even
  the smallest does not fit, (cap, None) when cap does. The two are compiles `multiple`
  apart, or within `tolerance` x the first of each other when that is wider.

  While the per-chip peak grows linearly with the batch (activations; the sharded weights
  and Adam state are fixed), the next batch to compile is where the line through the two
  nearest compiles meets the HBM (through zero while there is one compile), rounded down
  to the multiple: regula falsi, two or three compiles. The TPU compiler does not grow
  that way near its limit: it rematerialises to fit (BERT-Base on v4-8 held 28.5-28.8 GiB
  per chip from batch 2,696 to 6,848), so the line overshoots; a guess that leaves more
  than half of its bracket is followed by a bisection step (geometric while the bracket
  spans more than 2x), which bounds the search at about twice bisection's compiles.
  `bracket`: a batch known to fit and one known not to (an earlier search's log): the
  search starts from them. `trail` gets each compile's batch, fit, peak bytes and whether
  the compiler refused it."""
  hbm = first["hbm_bytes"]
  peaks = {}

  def record(batch, result):
    """The batch's peak (for a refused compile, what the compiler said it needs: its
    temporaries plus the sharded state); the line aims at the smaller of the chip's HBM
    and the compiler's own limit, once a refusal has named it."""
    nonlocal hbm
    peaks[batch] = result["peak_bytes_per_device"] or (
        result["temp_bytes_per_device"] + result.get("params_bytes_per_device", 0) +
        result.get("opt_state_bytes_per_device", 0))
    hbm = min(hbm, result.get("compiler_hbm_bytes_per_device") or hbm)
    return result["fits"]

  def fits(batch):
    result = plan(row, batch)
    fit = record(batch, result)
    if trail is not None:
      trail.append({"batch": batch, "fits": fit, "peak_bytes": peaks[batch],
                    "refused": "out_of_memory" in result,
                    "xla_flops_per_device": result.get("xla_flops_per_device")})
    print(f"  batch {batch}: {'fits' if fit else 'does not fit'} "
          f"({peaks[batch] / GIB:.2f} GiB/chip)", file=sys.stderr, flush=True)
    return fit

  def meets_hbm(a, b):  # the batch at which the line through compiles a and b reaches HBM
    if b is None:
      a, b = 0, a
    if b not in peaks or (a != 0 and a not in peaks):
      return None
    peak_a = 0 if a == 0 else peaks[a]
    slope = (peaks[b] - peak_a) / (b - a)
    return None if slope <= 0 else a + (hbm - peak_a) / slope

  def down(batch):
    return int(batch) // multiple * multiple

  record(row.batch, first)
  low, high = (row.batch, None) if first["fits"] else (None, row.batch)
  bisect = False
  if bracket:
    low, high = bracket
    bisect = True
  while True:
    if low is not None and high is not None:
      if high - low <= max(multiple, tolerance * low):
        return low, high
      width = high - low
      if bisect or _bent(peaks, low, high):
        guess = down((low * high) ** 0.5 if high > 2 * low else (low + high) / 2)
      else:
        guess = down(meets_hbm(low, high) or (low + high) / 2)
      guess = min(max(guess, low + multiple), high - multiple)
    elif low is not None:  # every compile so far fits: extrapolate up
      if low >= cap:
        return low, None
      below = [b for b in peaks if b < low]
      target = meets_hbm(max(below), low) if below else meets_hbm(low, None)
      guess = min(cap, down(min(target or 2 * low, 8 * low)))
      guess = max(guess, low + multiple)
      width = None
    else:  # nothing fits yet: extrapolate down
      if high <= multiple:
        return None, high
      above = [b for b in peaks if b > high]
      target = meets_hbm(high, min(above)) if above else meets_hbm(high, None)
      guess = max(multiple, min(down(target if target is not None else high / 2),
                                high - multiple))
      width = None
    if fits(guess):
      low = guess
    else:
      high = guess
    # Bisect next when this guess left more than half of the bracket it was made in.
    bisect = width is not None and high is not None and low is not None and (
        high - low > width / 2)


def largest_cell(r: dict) -> str:
  """The largest batch found, with the smallest that did not fit where they are not one
  sharding multiple apart (--max_batch_tolerance)."""
  low, high = r.get("largest_batch"), r.get("smallest_batch_over")
  if low is None:
    return "none" if high else "n/a"
  multiple = r["mesh"].get("data", 1) * r["mesh"].get("fsdp", 1) if "mesh" in r else 1
  return f"{low:,}" if high is None or high - low <= multiple else f"{low:,} (not {high:,})"


def table(results: list[dict], with_max_batch: bool) -> str:
  head = ["model", "seq", "target", "mesh", "global batch", "peak GiB/chip (compiler)",
          "HBM GiB", "fits", *(["largest batch"] if with_max_batch else []),
          "compiler TFLOP/chip", "compiler GB/chip", "bound ms/step", "MFU ceiling",
          "tokens/s/chip at the bound"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in results:
    row = r["row"]
    if "error" in r:
      lines.append(f"| {row['model']} | {row['seq']} | {row['target']} | {row['mesh']} | "
                   f"{row['batch']} | error: {r['error'][:80]} |")
      continue
    if "out_of_memory" in r:
      need = r["temp_bytes_per_device"] or r["peak_bytes_per_device"]
      lines.append(f"| {row['model']} | {row['seq']} | {row['target']} | {row['mesh']} | "
                   f"{r['global_batch']} | > {r['compiler_hbm_bytes_per_device'] / GIB:.2f} "
                   f"(refused: needs {need / GIB:.2f}) | {r['hbm_bytes'] / GIB:.0f} | no |" +
                   (" n/a |" if with_max_batch else "") + " n/a | n/a | n/a | n/a | n/a |")
      continue
    tflops = r["xla_flops_per_device"]
    gbytes = r["xla_bytes_accessed_per_device"]
    lower = "≥ " if r.get("bound_is_lower") else ""
    tokens = r.get("tokens_per_s_per_chip")
    cells = [row["model"], row["seq"], row["target"], row["mesh"], r["global_batch"],
             f"{r['peak_bytes_per_device'] / GIB:.2f}",
             f"{r['hbm_bytes'] / GIB:.0f}" if "hbm_bytes" in r else "n/a",
             {True: "yes", False: "no"}.get(r.get("fits"), "n/a"),
             *([largest_cell(r)] if with_max_batch else []),
             "n/a" if tflops is None else f"{tflops / 1e12:.1f}",
             "n/a" if gbytes is None else f"{gbytes / 1e9:.1f}",
             f"{lower}{r['bound_seconds'] * 1e3:.0f}" if "bound_seconds" in r else "n/a",
             # A bound from the model's FLOPs alone (GPUs) allows 100% by construction.
             "n/a" if lower or "mfu_ceiling" not in r else f"{r['mfu_ceiling']:.0%}",
             "n/a" if tokens is None else f"{'≤ ' if lower else ''}{tokens:,.0f}"]
    lines.append("| " + " | ".join(map(str, cells)) + " |")
  return "\n".join(lines)


def select(rows, model_prefix: str = "", targets: str = "", seqs: str = "") -> list[Row]:
  """The rows whose model name starts with model_prefix, whose target is one of the
  comma-separated targets and whose sequence length one of seqs (every row for empty ones)."""
  return [r for r in rows if r.model.startswith(model_prefix) and (
      not targets or r.target in targets.split(",")) and (
      not seqs or str(r.seq) in seqs.split(","))]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--rows", default="",
                      help="only models whose name starts with this (large: not albert-xxlarge)")
  parser.add_argument("--targets", default="", help="comma-separated targets to keep")
  parser.add_argument("--seqs", default="", help="comma-separated sequence lengths to keep")
  parser.add_argument("--max_batch", action="store_true",
                      help="also find the largest batch that fits (2-4 more compiles a row "
                      "while the peak is linear in the batch; more where the compiler "
                      "rematerialises to fit)")
  parser.add_argument("--max_batch_tolerance", type=float, default=0.0,
                      help="stop the search once the batches that fit and do not are within "
                      "this fraction of each other (0: the sharding multiple apart)")
  parser.add_argument("--max_batch_bracket", default="",
                      help="LOW,HIGH: a batch known to fit and one known not to (one row)")
  parser.add_argument("--dry", action="store_true",
                      help="one tiny row on this machine's devices (the code path, fast)")
  parser.add_argument("--recipes", action="store_true",
                      help="the family configs' paper-scale recipes (RECIPES), with the hours "
                      "and chip-hours of each paper's token budget; --rows picks recipes by "
                      "the start of 'NAME:ARG'")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="with --recipes: a config field of every row changed after the "
                      "recipe's (repeatable; e.g. --set=model.dtype=bfloat16)")
  parser.add_argument("--rows_per_chip", type=int, default=0,
                      help="with --recipes: this many rows per chip as the micro-batch (0: "
                      "the recipe's, up to 16,384 tokens a chip)")
  args = parser.parse_args(argv)
  if (args.set or args.rows_per_chip) and not args.recipes:
    parser.error("--set and --rows_per_chip change --recipes rows")
  if args.recipes:
    # Imported here, as recipe_plan imports this module. Run as a script, this file loads
    # once more as `target_plan`: harmless, as plan() asks each row for its config and
    # budget and no code compares one copy's classes with the other's.
    import recipe_plan
    rows = recipe_plan.with_changes(
        recipe_plan.select_recipes(recipe_plan.recipe_rows(), args.rows, args.targets),
        args.set, args.rows_per_chip)
    print_table = recipe_plan.recipe_table
  else:
    rows, print_table = select(ROWS, args.rows, args.targets, args.seqs), table
  if args.max_batch_bracket and len(rows) != 1:
    parser.error(f"--max_batch_bracket is one row's: {len(rows)} rows are selected")
  if args.dry:  # the plain table's code path, --recipes or not
    rows, print_table = [Row("tiny", 128, 8, "host", "data=1")], table
  results = []
  for row in rows:
    try:
      result = plan(row)
      if args.max_batch and "fits" in result and args.recipes:
        # A recipe's micro-batch must divide its paper's batch: the fewest accumulation steps.
        trail = []
        result = recipe_plan.fewest_accumulation(row, result, trail)
        result["max_batch_compiles"] = trail
      elif args.max_batch and "fits" in result:
        multiple = result["mesh"].get("data", 1) * result["mesh"].get("fsdp", 1)
        bracket = (tuple(int(b) for b in args.max_batch_bracket.split(","))
                   if args.max_batch_bracket else None)
        result["max_batch_compiles"] = []
        result["largest_batch"], result["smallest_batch_over"] = largest_batch(
            row, result, multiple, tolerance=args.max_batch_tolerance, bracket=bracket,
            trail=result["max_batch_compiles"])
    except Exception as error:  # a row that does not compile is a row of the table
      result = {"row": dataclasses.asdict(row), "error": f"{type(error).__name__}: {error}"}
    results.append(result)
    print(f"{row}: " + (f"error: {result['error'][:300]}" if "error" in result else
                        "refused: out of memory" if "out_of_memory" in result else
                        f"peak {result['peak_bytes_per_device'] / GIB:.2f} GiB/chip") +
          (f", largest batch {result['largest_batch']}" if "largest_batch" in result else ""),
          file=sys.stderr, flush=True)
  print(print_table(results, args.max_batch))
  print(json.dumps(results))
  return results


if __name__ == "__main__":
  main()
