"""The pretraining step measured on the accelerator at hand, beside its compile-only plan.

  bash bench/device_check.sh          # on a GPU or TPU host: under 8 minutes on one GPU
  bash bench/device_check.sh --dry    # CPU, tiny shapes, the same code path (a test runs it)

For each row (BERT-base at seq 128 and 512, ModernBERT-base at 512; bfloat16 compute, fp32
params and optimizer state) and each attention path this platform runs (einsum, xla, and
cudnn on GPUs or splash on TPUs; ModernBERT has its own attention), it compiles the real
train step once (bert_jax.run.compile_report.lower_train_step, over every local device),
reads the compiler's plan of per-device peak memory, then times `--steps` steps after
`--warmup` and reports measured tokens/s, MFU against the chip's published bf16 peak
(bert_jax.core.flops; a measured matmul peak where the chip is not in its table), and the
device's measured peak memory (`memory_stats`, where the platform keeps it) against the
plan's; each row also gives examples/s, and one row is a fine-tuning step (SST-2
classification on BERT-base at 128). With --shards (bench/device_check.sh: BERT_JAX_SHARDS)
it then trains a real small run from pre-tokenized shards (train_from_shards). It writes
all rows as JSON (device, date, commit, and whether TensorFlow was imported: none of this
needs it) to --output.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from bert_jax.core import flops  # noqa: E402
from bert_jax.files import storage  # noqa: E402
from bert_jax.pretrain import shards  # noqa: E402
from bert_jax.run import compile_report  # noqa: E402
from bert_jax.run import trainer  # noqa: E402
from bert_jax.models.config import config_for_size  # noqa: E402
from bert_jax.configs import glue  # noqa: E402
from configs import base  # noqa: E402
from configs import tiny  # noqa: E402


def _modernbert_base():
  config = base.get_config()
  config.model.update(config_for_size("modernbert-base").to_json_dict())
  return config


def _sst2_base():
  """SST-2 fine-tuning of a fresh BERT-base (the architecture in full, no weights read)."""
  config = glue.get_config("dataset=sst2")
  config.init_from = ""
  config.model.update(config_for_size("base").to_json_dict())
  return config


# (name, config maker, seq, batch per device, whether model.attention_impl applies: ModernBERT
# runs its own attention, RoPE and local windows, whatever the field says); the attention
# paths come from the platform.
ROWS = (("bert-base", base.get_config, 128, 64, True),
        ("bert-base", base.get_config, 512, 16, True),
        ("modernbert-base", _modernbert_base, 512, 16, False),
        ("bert-base-sst2", _sst2_base, 128, 32, True))
# Tiny shapes of --dry: H32, 1 layer, 512 word pieces, T128 (splash's smallest), batch 2 a
# device.
_DRY = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2,
        "num_hidden_layers": 1, "vocab_size": 512}
_FUSED = {"gpu": "cudnn", "tpu": "splash"}


def attention_paths(platform: str) -> list[str]:
  return ["einsum", "xla"] + ([_FUSED[platform]] if platform in _FUSED else [])


def row_config(make, seq: int, batch: int, impl: str, dry: bool):
  config = make()
  config.data.max_seq_length = seq
  config.data.max_predictions_per_seq = max(1, round(seq * 0.15))
  config.data.batch_size = batch * jax.device_count()
  config.mesh.update(data=-1, fsdp=1, tensor=1)
  config.model.dtype = "bfloat16"
  config.model.attention_impl = impl
  config.model.attention_probs_dropout_prob = 0.0  # the fused paths have none
  config.model.max_position_embeddings = max(seq, config.model.max_position_embeddings)
  if dry:
    config.model.update(_DRY)
  return config


def _peak_bytes_in_use() -> int | None:
  stats = jax.local_devices()[0].memory_stats() or {}
  return stats.get("peak_bytes_in_use")


def measure(config, steps: int, warmup: int, peak_flops: float) -> dict:
  """One row: the plan (compiler memory analysis) and the measured steps."""
  setup, lowered, _ = compile_report.lower_train_step(config)
  compiled = lowered.compile()
  memory = compiled.memory_analysis()
  plan_peak = (memory.argument_size_in_bytes + memory.output_size_in_bytes -
               memory.alias_size_in_bytes + memory.temp_size_in_bytes)
  with jax.set_mesh(setup.mesh), nn.logical_axis_rules(setup.rules):
    state = jax.jit(lambda r: nn.unbox(setup.init_state(r)),
                    out_shardings=setup.state_sharding)(setup.init_rng)
    batch = jax.device_put(setup.task.example_batch(config.data.batch_size),
                           setup.batch_sharding)
    for _ in range(warmup):
      state, metrics = compiled(state, batch, None)
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for _ in range(steps):
      state, metrics = compiled(state, batch, None)
    jax.block_until_ready(metrics)
    seconds = (time.perf_counter() - start) / steps
  tokens = config.data.batch_size * config.data.max_seq_length
  model_flops = setup.task.step_flops(batch)
  return {"seconds_per_step": seconds, "tokens_per_s_per_device": tokens / seconds /
          jax.device_count(), "examples_per_s": config.data.batch_size / seconds,
          "mfu": model_flops / seconds / peak_flops,
          "plan_peak_bytes_per_device": int(plan_peak),
          "measured_peak_bytes_per_device": _peak_bytes_in_use()}


def train_from_shards(pattern: str, dry: bool) -> dict:
  """A real small pretraining run, BERT-Tiny (configs/tiny.py; --dry: H32, 3 steps) read
  from pre-tokenized shards (bert_jax/pretrain/shards.py: no TensorFlow) through
  trainer.train_and_evaluate: its first and last logged loss, wall seconds (compile
  included) and the last logged tokens/s."""
  meta = shards.read_rows(storage.glob(pattern)[0])[1] if storage.glob(pattern) else {}
  seq = int(meta.get("max_seq_length", 128))
  config = tiny.get_config("runlocal=True")
  config.data.update(shards=pattern, eval_shards="", max_seq_length=seq,
                     max_predictions_per_seq=max(1, round(seq * 0.15)),
                     batch_size=(8 if dry else 64) * jax.device_count())
  config.model.max_position_embeddings = max(seq, config.model.max_position_embeddings)
  config.num_train_steps = 3 if dry else 300
  config.log_every_steps = 1 if dry else 50
  config.checkpoint_every_steps = config.eval_every_steps = config.num_train_steps
  if dry:
    config.model.update(hidden_size=32, intermediate_size=64, num_attention_heads=2)
  with tempfile.TemporaryDirectory() as workdir:
    start = time.perf_counter()
    result = trainer.train_and_evaluate(config, workdir)
    seconds = time.perf_counter() - start
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      logged = [row for row in map(json.loads, f) if "loss" in row]
  return {"shards": pattern, "seq": seq, "global_batch": int(config.data.batch_size),
          "steps": int(config.num_train_steps), "first_loss": logged[0]["loss"],
          "last_loss": float(result["loss"]), "mlm_accuracy": float(result["mlm_accuracy"]),
          "seconds": seconds, "tokens_per_s": logged[-1].get("tokens_per_sec")}


def _commit() -> str:
  here = os.path.dirname(os.path.abspath(__file__))
  result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                          capture_output=True, text=True)
  return result.stdout.strip() or "unknown"


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--dry", action="store_true", help="tiny shapes on any backend")
  parser.add_argument("--steps", type=int, default=10)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--output", required=True, help="JSON file to write")
  parser.add_argument("--shards", default="", help="pattern of pretraining shard files "
                      "(bert_jax/pretrain/shards.py) for a small training run; '' skips it")
  args = parser.parse_args()
  steps, warmup = (2, 1) if args.dry else (args.steps, args.warmup)
  device = jax.devices()[0]
  peak_flops = flops.device_peak_flops("bfloat16") * jax.device_count()  # all devices
  rows = []
  for name, make, seq, batch, has_impls in ROWS:
    if args.dry and any(row["model"] == name for row in rows):
      continue  # --dry runs every model once, at T128
    impls = attention_paths(device.platform) if has_impls else ["einsum"]
    if args.dry and rows:
      impls = impls[:1]  # --dry: every path once (bert-base), each later model at einsum
    for impl in impls:
      config = row_config(make, 128 if args.dry else seq, 2 if args.dry else batch, impl,
                          args.dry)
      try:
        result = measure(config, steps, warmup, peak_flops)
      except Exception as e:  # a path this device cannot run: recorded, the rest go on
        result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
      row = {"model": name, "seq": config.data.max_seq_length,
             "global_batch": int(config.data.batch_size), "attention_impl": impl, **result}
      rows.append(row)
      print(json.dumps(row), flush=True)
  if args.shards:
    try:
      shard_run = train_from_shards(args.shards, args.dry)
    except Exception as e:  # recorded like a row's error
      shard_run = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
  else:
    shard_run = {"skipped": "no --shards (BERT_JAX_SHARDS) given"}
  print(json.dumps({"train_from_shards": shard_run}), flush=True)
  out = {"device_kind": device.device_kind, "platform": device.platform,
         "devices": jax.device_count(), "date": datetime.date.today().isoformat(),
         "commit": _commit(), "dry": args.dry, "rows": rows, "train_from_shards": shard_run,
         "tensorflow_imported": "tensorflow" in sys.modules}
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  with open(args.output, "w") as f:
    json.dump(out, f, indent=1)
  print(f"wrote {args.output}")
  return 1 if any("error" in row for row in rows + [shard_run]) and args.dry else 0


if __name__ == "__main__":
  sys.exit(main())
