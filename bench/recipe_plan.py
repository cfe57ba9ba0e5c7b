r"""The family configs' paper-scale recipes planned against their token budgets: the rows
and the table of `bench/target_plan.py --recipes`.

  PYTHONPATH=~/targets JAX_PLATFORMS=cpu python bench/target_plan.py --recipes \
      --rows=modernbert --targets=tpu:v5p-8 --max_batch

RECIPES names each recipe (`configs/NAME.py:size=...`, each paper's model, optimizer,
objectives and rows); each is planned on one host of each TPU generation and 8 H100s
(RECIPE_TARGETS). Each row compiles one micro-batch of the recipe's step (rows_per_chip x
chips rows, the paper's global batch reached by accumulating that many; the compile is
the trainer's step without accumulation, so it holds the optimizer's update, which the
bound then charges to every micro-step, not once a step), layers unrolled (the
compiler's cost analysis counts a scanned loop's body once), the platform's fused
attention with its dropout off (on GPUs XLA's for a recipe computing in float32:
cuDNN's runs in bf16/fp16). Beside the compiler facts and the bound it prints the
estimates of the paper's token budget (steps x global batch x row length) at the bound:
the hours the host needs (tokens / (tokens/s per chip x chips)) and its chip-hours, lower
bounds like the bound they come from but for the update it charges to every micro-step.
DistilBERT's step runs its teacher's forward: the row's teacher is the architecture the
recipe names (TEACHERS: BERT-base) from a config.json alone, so no weights are needed to
plan it. A recipe the compiler refuses is a row with its error.

`--max_batch` plans each row at the largest micro-batch that fits the chip and divides
the paper's batch (`fewest_accumulation`: the fewest accumulation steps, 2-5 more
compiles), with the next micro-batch's peak and the hours at the recipe's own micro-batch
beside it: more rows a chip spread the traffic that does not grow with the rows (the
weights, their gradients, Adam's state) over more tokens, which the bound counts; a
micro-batch the compiler fits only by recomputing activations counts more FLOPs.

`--set=KEY=VALUE` (repeatable) changes a config field of every row after the recipe's, and
`--rows_per_chip=N` sets the micro-batch (it must divide the paper's batch): a recipe
planned with bf16 compute, say, or at half its rows (`with_changes`); the table names the
changes beside the recipe.

  ... bench/target_plan.py --recipes --rows=base:seq=128 --targets=tpu:v5e-8 \
      --set=model.dtype=bfloat16 --rows_per_chip=16

This module has no command line of its own: bench/target_plan.py's `--recipes` imports it
and plans its rows with the same machinery as its own (target_plan.plan, largest_batch),
so the two take the same flags. It imports target_plan, which imports it only inside
main(): no cycle at import time.

  import recipe_plan            # with bench/ on sys.path
  rows = recipe_plan.select_recipes(recipe_plan.recipe_rows(), "albert", "tpu:v6e-8")
  print(recipe_plan.recipe_table([target_plan.plan(row) for row in rows], False))
"""
import ast
import dataclasses
import functools
import importlib
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # target_plan

import target_plan  # noqa: E402
from target_plan import GIB, fused_attention  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402
from bert_jax.weights import hf_families  # noqa: E402


@dataclasses.dataclass(frozen=True)
class RecipeRow:
  recipe: str  # "NAME:ARG": configs/NAME.py's get_config(ARG)
  target: str
  mesh: str
  batch: int   # global micro-batch (rows_per_chip x chips, at most the paper's batch)
  steps: int = 0  # the budget's steps; 0: the config's num_train_steps
  # ("model.dtype", "bfloat16"), ...: config fields set after the recipe's (--set)
  overrides: tuple[tuple[str, str], ...] = ()

  def config(self, batch: int | None = None):
    """What target_plan.plan compiles: recipe_config(self, batch)."""
    return recipe_config(self, batch)

  def budget(self) -> dict:
    """What target_plan.plan adds to the plan, with the hours at its bound: budget(self)."""
    return budget(self)


# The papers' recipes: (configs/NAME.py arg, the budget's steps where the config's differ).
# BERT (Devlin et al. 2019, Sec. A.2): 90% of 1M steps at 128 tokens, the rest at 512.
# ERNIE's three stages share one step (one compile): the budget is all three.
RECIPES = (
    ("base:seq=128", 900_000), ("base:seq=512", 100_000),
    ("large:seq=128", 900_000), ("large:seq=512", 100_000),
    ("roberta:size=base", 0),
    ("electra:size=small", 0), ("electra:size=base", 0), ("electra:size=large", 0),
    ("albert:size=base", 0), ("albert:size=large", 0), ("albert:size=xxlarge", 0),
    ("spanbert:size=base", 0), ("spanbert:size=large", 0),
    ("modernbert:size=base", 0), ("modernbert:size=base,phase=2", 0),
    ("modernbert:size=large", 0),
    ("ernie:size=base", 1_000_000),
    ("distilbert:size=base", 0),
    ("reformer:size=enwik8", 0),
)
# One host of each TPU generation (v4-8 and v5p-8: 4 chips; v5e-8 and v6e-8: 8) and 8 H100s.
RECIPE_TARGETS = (("tpu:v4-8", 4), ("tpu:v5e-8", 8), ("tpu:v5p-8", 4), ("tpu:v6e-8", 8),
                  ("gpu:h100x8", 8))
TOKENS_PER_CHIP = 16_384  # a micro-batch's rows per chip: this many tokens, at least one row


# A distillation recipe's teacher, by the size its docstring names: the plan compiles the
# teacher's forward beside the student's step from its architecture alone (config.json), as
# distillation reads a teacher's config without its weights until the run loads them.
TEACHERS = {"distilbert:size=base": "base"}  # BERT-base-uncased (configs/distilbert.py)


@functools.cache
def _config_only_teacher(size: str) -> str:
  """A folder holding only the HF config.json of BERT at `size` (no weights)."""
  folder = os.path.join(tempfile.mkdtemp(prefix="recipe_plan_teacher_"), f"bert-{size}")
  os.makedirs(folder)
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(hf_families.config_to_hf(config_for_size(size)), f)
  return folder


def _recipe_config(recipe: str):
  name, _, arg = recipe.partition(":")
  if recipe in TEACHERS:
    arg += f",teacher={_config_only_teacher(TEACHERS[recipe])}"
  return importlib.import_module(f"configs.{name}").get_config(arg)


def _rows_per_chip(seq: int, batch: int, chips: int) -> int:
  """The most rows per chip, up to TOKENS_PER_CHIP tokens (at least one row), that divide
  the paper's batch evenly over the chips (1 where the chips do not divide it)."""
  share = batch // chips if batch % chips == 0 else 1
  most = max(1, min(TOKENS_PER_CHIP // seq, share))
  return next(n for n in range(most, 0, -1) if share % n == 0)


def recipe_rows(recipes=RECIPES, targets=RECIPE_TARGETS) -> tuple[RecipeRow, ...]:
  """Every recipe on every target, fully sharded (fsdp over the host's chips)."""
  rows = []
  for recipe, steps in recipes:
    config = _recipe_config(recipe)
    batch, seq = int(config.data.batch_size), int(config.data.max_seq_length)
    for target, chips in targets:
      per_chip = _rows_per_chip(seq, batch, chips)
      rows.append(RecipeRow(recipe, target, f"fsdp={chips}", per_chip * chips, steps))
  return tuple(rows)


def recipe_config(row: RecipeRow, batch: int | None = None):
  """The recipe's config at the row's micro-batch and mesh: no accumulation, layers
  unrolled, the platform's fused attention (dropout off: splash has none) where the family
  takes one (Reformer's local and LSH attention are its own; XLA's on GPUs for a recipe
  computing in float32, which cuDNN's kernel refuses); then row.overrides."""
  config = _recipe_config(row.recipe)
  config.data.batch_size = batch or row.batch
  config.grad_accum_steps = 1
  # Unrolled: XLA's cost analysis counts a scanned loop's body once (SpanBERT-large on
  # v5p-8 scanned: 2.2 of the model's 32.6 TFLOP per chip), its bytes likewise.
  config.model.scan_layers = False
  if config.model.get("family", "bert") != "reformer":
    dtype = dict(row.overrides).get("model.dtype", config.model.get("dtype"))
    config.model.attention_impl = fused_attention(row.target, dtype)
    config.model.attention_probs_dropout_prob = 0.0
  for axis in ("data", "fsdp", "tensor"):
    config.mesh[axis] = 1
  for part in row.mesh.split(","):
    axis, size = part.split("=")
    config.mesh[axis] = int(size)
  for key, value in row.overrides:
    set_field(config, key, value)
  return config


def set_field(config, key: str, value: str) -> None:
  """config's dotted field `key` set to `value`, read as the field's type (a new field: as a
  Python literal, else the string); a one-line error names a field the config lacks."""
  *parents, leaf = key.split(".")
  node = config
  for part in parents:
    if part not in node:
      raise ValueError(f"--set {key}={value}: the config has no field {part!r}")
    node = node[part]
  old = node.get(leaf)
  if isinstance(old, bool):
    node[leaf] = value.lower() in ("1", "true", "yes")
  elif isinstance(old, (int, float, str)):
    node[leaf] = type(old)(value)
  else:
    try:
      node[leaf] = ast.literal_eval(value)
    except (ValueError, SyntaxError):
      node[leaf] = value


def with_changes(rows, overrides=(), rows_per_chip: int = 0) -> list[RecipeRow]:
  """The rows with `overrides` ("KEY=VALUE" strings) set on their configs and, with
  rows_per_chip, that many rows per chip as the micro-batch (the paper's batch reached by
  accumulation, as it must divide it)."""
  pairs = tuple(tuple(o.split("=", 1)) for o in overrides)
  if any(len(p) != 2 for p in pairs):
    raise ValueError(f"--set {overrides}: expected KEY=VALUE")
  out = []
  for row in rows:
    batch = row.batch
    if rows_per_chip:
      batch = rows_per_chip * math.prod(int(p.split("=")[1]) for p in row.mesh.split(","))
      paper = budget(row)["paper_batch"]
      if paper % batch:
        raise ValueError(f"--rows_per_chip={rows_per_chip}: {row.recipe} on {row.target} "
                         f"gives a micro-batch of {batch}, which does not divide the paper's "
                         f"batch of {paper}")
    out.append(dataclasses.replace(row, batch=batch, overrides=row.overrides + pairs))
  return out


def budget(row: RecipeRow) -> dict:
  """The paper's token budget of the row's recipe: steps x global batch x row length."""
  config = _recipe_config(row.recipe)
  steps = row.steps or int(config.num_train_steps)
  batch, seq = int(config.data.batch_size), int(config.data.max_seq_length)
  return {"paper_steps": steps, "paper_batch": batch, "seq": seq,
          "accumulation": -(-batch // row.batch), "budget_tokens": steps * batch * seq}


def micro_batches(row: RecipeRow) -> list[int]:
  """The global micro-batches that reach the paper's batch by whole accumulation steps on
  the row's chips, smallest first: chips x every divisor of the paper's rows per chip (the
  row's own micro-batch alone where the chips do not divide the paper's batch)."""
  chips = math.prod(int(part.split("=")[1]) for part in row.mesh.split(","))
  paper = budget(row)["paper_batch"]
  if paper % chips:
    return [row.batch]
  share = paper // chips
  return [d * chips for d in range(1, share + 1) if share % d == 0]


def fewest_accumulation(row: RecipeRow, first: dict, trail: list | None = None) -> dict:
  """The plan at the largest micro-batch of micro_batches(row) whose compile fits the chip
  (the fewest accumulation steps), from `first` (the plan at row.batch): its result dict,
  with "recipe_micro_batch" (row.batch's batch, accumulation and hours) and "next_micro_batch"
  (the next candidate's batch, peak bytes and whether the compiler refused it; None where
  the paper's whole batch fits). With no candidate fitting, the smallest's plan.

  The per-chip peak grows with the batch by a fixed step per row (activations) over the
  sharded weights and Adam state: from the largest fit, the next compile is the largest
  candidate under where the line through the two largest fits (through zero while there
  is one) meets the chip's HBM (or the compiler's own limit, once a refusal names it),
  at least the next candidate; between a fit and a miss the candidates are bisected, as the
  TPU compiler rematerialises near its limit and the peak bends (bench/target_plan.py's
  largest_batch). Divisors are few (12 for 2,048 rows a chip), so a search is 2-4 compiles.
  `trail` gets each compile's batch, fit, peak bytes and its bound's tokens/s per chip and
  hours. The fewest steps are not always the fastest: a micro-batch that fits only by the
  compiler's rematerialisation does more FLOPs a token, which the bound counts."""
  candidates = micro_batches(row)
  plans = {row.batch: first}
  hbm = first.get("hbm_bytes") or 0

  def peak(result):
    return result["peak_bytes_per_device"] or (
        result["temp_bytes_per_device"] + result.get("params_bytes_per_device", 0) +
        result.get("opt_state_bytes_per_device", 0))

  def compile_at(index):
    nonlocal hbm
    batch = candidates[index]
    result = target_plan.plan(dataclasses.replace(row, batch=batch))
    plans[batch] = result
    hbm = min(hbm, result.get("compiler_hbm_bytes_per_device") or hbm)
    if trail is not None:
      trail.append({"batch": batch, "fits": result["fits"], "peak_bytes": peak(result),
                    "refused": "out_of_memory" in result,
                    **{key: result[key] for key in ("tokens_per_s_per_chip", "budget_hours")
                       if key in result}})
    rate = (f", {result['tokens_per_s_per_chip']:,.0f} tokens/s/chip at the bound"
            if "tokens_per_s_per_chip" in result else "")
    print(f"  micro-batch {batch}: {'fits' if result['fits'] else 'does not fit'} "
          f"({peak(result) / GIB:.2f} GiB/chip{rate})", file=sys.stderr, flush=True)
    return result["fits"]

  start = candidates.index(row.batch) if row.batch in candidates else 0
  low, high = (start, None) if first["fits"] else (None, start)
  while True:
    if low is not None and (low == len(candidates) - 1 or high == low + 1):
      break
    if low is None and high == 0:
      break
    if low is not None and high is not None:
      guess = (low + high) // 2
    elif low is not None:  # everything so far fits: where the line meets the HBM
      fits = sorted(b for b, r in plans.items() if r["fits"])
      b1 = fits[-1]
      b0 = fits[-2] if len(fits) > 1 else 0
      p0 = peak(plans[b0]) if b0 else 0
      slope = (peak(plans[b1]) - p0) / (b1 - b0)
      aim = b1 + (hbm - peak(plans[b1])) / slope if slope > 0 else candidates[-1]
      guess = max([i for i, b in enumerate(candidates) if b <= aim] + [low + 1])
    else:  # nothing fits yet: halve the batch
      guess = min(max([i for i, b in enumerate(candidates) if b <= candidates[high] // 2] +
                      [0]), high - 1)
    if compile_at(guess):
      low = guess
    else:
      high = guess
  best = dict(plans[candidates[low if low is not None else 0]])
  best["recipe_micro_batch"] = {key: first.get(key) for key in (
      "global_batch", "accumulation", "peak_bytes_per_device", "budget_hours",
      "budget_chip_hours", "bound_is_lower")}
  over = candidates[high] if high is not None else None
  best["next_micro_batch"] = over and {
      "batch": over, "peak_bytes": peak(plans[over]),
      "refused": "out_of_memory" in plans[over]}
  return best


def _figure(value: float) -> str:
  """Whole numbers from 10 up, two significant digits below (0.14, not 0.0)."""
  return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def recipe_table(results: list[dict], with_max_batch: bool) -> str:
  """The recipes' rows: compiler facts (peak, fit), the bound, and the estimates of the
  paper's budget at it (hours on the host, chip-hours). with_max_batch: rows from
  fewest_accumulation, with the next micro-batch's peak (the one that does not fit) and the
  hours at the recipe's own micro-batch beside them."""
  head = ["recipe", "seq", "target", "mesh", "micro-batch (x accum.)",
          "peak GiB/chip (compiler)", "HBM GiB", "fits",
          *(["next micro-batch: peak GiB/chip"] if with_max_batch else []),
          "bound ms/micro-step", "tokens/s/chip at the bound", "paper tokens",
          "hours at the bound (estimate)", "chip-hours (estimate)",
          *(["hours at the recipe's micro-batch (estimate)"] if with_max_batch else [])]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in results:
    row = r["row"]
    name = row["recipe"] + "".join(f", {k}={v}" for k, v in row.get("overrides", ()))
    start = f"| {name} | {r.get('seq', '')} | {row['target']} | {row['mesh']} | "
    if "error" in r:
      lines.append(start + f"{row['batch']} | error: {r['error'][:100]} |")
      continue
    micro = f"{r['global_batch']:,} (x {r['accumulation']})"
    if "out_of_memory" in r:
      need = r["temp_bytes_per_device"] or r["peak_bytes_per_device"]
      lines.append(start + f"{micro} | > {r['compiler_hbm_bytes_per_device'] / GIB:.2f} "
                   f"(refused: needs {need / GIB:.2f}) | {r['hbm_bytes'] / GIB:.0f} | no |" +
                   (" n/a |" if with_max_batch else "") + " n/a | n/a | "
                   f"{r['budget_tokens']:.3g} | n/a | n/a |" +
                   (" n/a |" if with_max_batch else ""))
      continue
    lower = "≥ " if r.get("bound_is_lower") else ""
    cells = [f"{micro}", f"{r['peak_bytes_per_device'] / GIB:.2f}",
             f"{r['hbm_bytes'] / GIB:.0f}" if "hbm_bytes" in r else "n/a",
             {True: "yes", False: "no"}.get(r.get("fits"), "n/a"),
             *([_next_cell(r)] if with_max_batch else []),
             f"{lower}{_figure(r['bound_seconds'] * 1e3)}" if "bound_seconds" in r else "n/a",
             f"{'≤ ' if lower else ''}{r['tokens_per_s_per_chip']:,.0f}"
             if "tokens_per_s_per_chip" in r else "n/a",
             f"{r['budget_tokens']:.3g}",
             f"{lower}{_figure(r['budget_hours'])}" if "budget_hours" in r else "n/a",
             f"{lower}{_figure(r['budget_chip_hours'])}" if "budget_chip_hours" in r else "n/a",
             *([_recipe_cell(r)] if with_max_batch else [])]
    lines.append(start + " | ".join(cells) + " |")
  return "\n".join(lines)


def _next_cell(r: dict) -> str:
  """The candidate micro-batch over the largest fit: its batch and peak (or the refusal)."""
  if "next_micro_batch" not in r:
    return "n/a"
  over = r["next_micro_batch"]
  if over is None:
    return "none: the paper's batch fits"
  peak = f"{over['peak_bytes'] / GIB:.2f}"
  return f"{over['batch']:,}: {'refused, needs ' if over['refused'] else ''}{peak}"


def _recipe_cell(r: dict) -> str:
  """The hours at the recipe's own micro-batch (the plan before the search), with it."""
  own = r.get("recipe_micro_batch")
  if not own or own.get("budget_hours") is None:
    return "n/a"
  lower = "≥ " if own.get("bound_is_lower") else ""
  return (f"{lower}{_figure(own['budget_hours'])} "
          f"({own['global_batch']:,} x {own['accumulation']})")


def select_recipes(rows, prefix: str = "", targets: str = "") -> list[RecipeRow]:
  """The recipe rows whose recipe starts with prefix and whose target is one of targets."""
  return [r for r in rows if r.recipe.startswith(prefix) and (
      not targets or r.target in targets.split(","))]
