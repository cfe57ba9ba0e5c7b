r"""Memory and cost planning without the hardware: compile the train step, report bytes.

  python -m bert_jax.train --config=configs/large.py --workdir=/tmp/x --compile_only \
      --config.mesh.fsdp=8      # with XLA_FLAGS=--xla_force_host_platform_device_count=8
  python -m bert_jax.train --config=configs/base.py --workdir=/tmp/x --compile_only \
      --target=tpu:v5e-16 --config.mesh.fsdp=16   # TPU's compiler, on a CPU-only host

Compiles the exact train step for the configured mesh over the target's devices
(`bert_jax.run.targets`: the host's, or a TPU slice's or GPU node's described without the
hardware) from abstract shapes (nothing is allocated) and reports per-device bytes of
params and optimizer state (from their shardings), the target compiler's memory analysis
(arguments, outputs, temporaries = activations and workspace), its FLOPs and bytes per
step for one device (where its cost analysis gives them; XLA's GPU compiler does not), the
model count of FLOPs, and the seconds the trace, lowering and compile took on the machine
it ran on.

A program that does not fit a TPU chip is refused by its compiler (RESOURCE_EXHAUSTED: "Ran
out of memory on HBM ..."): the report then says so (`out_of_memory`, the compiler's
words) with the bytes the compiler says it needs and has per chip, instead of the memory
and cost analysis. XLA's GPU compiler compiles such a program and reports its peak.
"""
import json
import re
import time

import jax
import numpy as np

from bert_jax.run import targets
from bert_jax.run import run_setup


def _per_device_bytes(tree, shardings) -> int:
  total = 0
  for leaf, s in zip(jax.tree.leaves(tree), jax.tree.leaves(shardings)):
    total += int(np.prod(s.shard_shape(leaf.shape))) * leaf.dtype.itemsize
  return total


def _total_bytes(tree) -> int:
  return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(tree))


_SIZE = r"([0-9.]+)([KMGTP]?)i?B?"
# The TPU compiler's two ways of refusing a program that does not fit (libtpu's words):
# (what the numbers measure, the pattern); both give the bytes needed, then the chip's.
_OUT_OF_MEMORY = (
    ("temp", re.compile(rf"required for HLO temporaries \({_SIZE}\) exceeds available HBM "
                        rf"\({_SIZE}\)")),
    ("peak", re.compile(rf"Used {_SIZE} of {_SIZE} hbm")),
)


def _size(number: str, unit: str) -> int:
  return round(float(number) * 1024 ** ("KMGTP".index(unit) + 1 if unit else 0))


def out_of_memory(error: Exception) -> dict | None:
  """The report fields of a compile the target's compiler refused for want of memory, or
  None for any other error: the compiler's message, the bytes it needs per chip (of
  temporaries, or in all) and the bytes it has."""
  message = str(error)
  if "RESOURCE_EXHAUSTED" not in message:
    return None
  for what, pattern in _OUT_OF_MEMORY:
    found = pattern.search(message)
    if found:
      need, have = _size(*found.group(1, 2)), _size(*found.group(3, 4))
      line = next(l for l in message.splitlines() if "RESOURCE_EXHAUSTED" in l)
      return {"out_of_memory": line.strip(), f"{what}_bytes_per_device": need,
              "compiler_hbm_bytes_per_device": have}
  return None


def lower_train_step(config, target: str = "host"):
  """(setup, the train step of `config` lowered for `target`'s devices, seconds it took):
  the trainer's own step (run_setup.Setup.jit_train_step), on abstract arguments."""
  setup = run_setup.build(config, devices=targets.devices(target))
  arguments = setup.step_structs(config.data.batch_size)
  start = time.perf_counter()
  with setup.on_mesh():
    lowered = setup.jit_train_step().lower(*arguments)
  return setup, lowered, time.perf_counter() - start


def compile_report(config, target: str = "host") -> dict:
  """The report of the train step of `config` compiled for `target` (targets.devices)."""
  setup, lowered, lower_seconds = lower_train_step(config, target)
  abstract, shardings = setup.abstract_state, setup.state_sharding
  batch = setup.task.example_batch(config.data.batch_size)
  device = setup.mesh.devices.flat[0]
  report = {
      "target": target,
      "platform": device.platform,
      "device_kind": device.device_kind,
      "devices": int(setup.mesh.size),
      "mesh": dict(setup.mesh.shape),
      "global_batch": int(config.data.batch_size),
      "seq_len": int(config.data.max_seq_length),
      "params_total_bytes": _total_bytes(abstract.params),
      "params_bytes_per_device": _per_device_bytes(abstract.params, shardings.params),
      "opt_state_total_bytes": _total_bytes(abstract.opt_state),
      "opt_state_bytes_per_device": _per_device_bytes(abstract.opt_state,
                                                      shardings.opt_state),
      "model_flops_per_step": float(setup.task.step_flops(batch)),
  }
  start = time.perf_counter()
  try:
    compiled = lowered.compile()
  except Exception as error:  # noqa: BLE001 (re-raised unless the compiler ran out of HBM)
    refused = out_of_memory(error)
    if refused is None:
      raise
    return {**report, "temp_bytes_per_device": None, "peak_bytes_per_device": None,
            "xla_flops_per_device": None, "xla_bytes_accessed_per_device": None,
            **refused, "compile_seconds": lower_seconds + time.perf_counter() - start}
  compile_seconds = lower_seconds + time.perf_counter() - start
  memory = compiled.memory_analysis()
  cost = compiled.cost_analysis() or {}  # None from XLA's GPU compiler
  if isinstance(cost, list):  # older jax returned one dict per program
    cost = cost[0]
  report.update({
      "argument_bytes_per_device": int(memory.argument_size_in_bytes),
      "output_bytes_per_device": int(memory.output_size_in_bytes),
      "alias_bytes_per_device": int(memory.alias_size_in_bytes),
      "temp_bytes_per_device": int(memory.temp_size_in_bytes),
      "xla_flops_per_device": float(cost["flops"]) if "flops" in cost else None,
      "xla_bytes_accessed_per_device": (float(cost["bytes accessed"])
                                        if "bytes accessed" in cost else None),
      "compile_seconds": compile_seconds,  # trace + lower + XLA compile, the machine it ran on
  })
  report["peak_bytes_per_device"] = (report["argument_bytes_per_device"] +
                                     report["output_bytes_per_device"] -
                                     report["alias_bytes_per_device"] +
                                     report["temp_bytes_per_device"])
  return report


def format_report(report: dict) -> str:
  gib = lambda b: "     n/a" if b is None else f"{b / 2 ** 30:8.3f} GiB"  # noqa: E731
  lines = [f"{report['target']}: mesh {report['mesh']} over {report['devices']} "
           f"{report['device_kind']} devices ({report['platform']}), global batch "
           f"{report['global_batch']} x seq {report['seq_len']}"]
  if "out_of_memory" in report:
    need = report["temp_bytes_per_device"] or report["peak_bytes_per_device"]
    lines.append(f"  does not fit: the compiler needs {need / 2 ** 30:.2f} GiB per device "
                 f"({'temporaries' if report['temp_bytes_per_device'] else 'in all'}) and "
                 f"has {report['compiler_hbm_bytes_per_device'] / 2 ** 30:.2f}: "
                 f"{report['out_of_memory']}")
  for key in ("params_bytes_per_device", "opt_state_bytes_per_device",
              "temp_bytes_per_device", "peak_bytes_per_device"):
    lines.append(f"  {key:30s} {gib(report[key])}")
  lines.append(f"  {'model TFLOPs per step':30s} {report['model_flops_per_step'] / 1e12:8.3f}")
  for key, label, scale in (("xla_flops_per_device", "compiler TFLOPs per device", 1e12),
                            ("xla_bytes_accessed_per_device", "compiler GB accessed per device",
                             1e9)):
    value = report[key]
    lines.append(f"  {label:30s} " + ("     n/a" if value is None else f"{value / scale:8.3f}"))
  lines.append(f"  {'compile seconds':30s} {report['compile_seconds']:8.1f}")
  lines.append("JSON: " + json.dumps(report))
  return "\n".join(lines)
