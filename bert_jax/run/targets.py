"""Devices to compile for: the host's, or a TPU slice's or GPU node's without the hardware.

  targets.devices("host")         # jax.devices()
  targets.devices("tpu:v5e-16")   # 16 TPU v5e chips; "tpu:v5e-16x2": two slices of them
  targets.devices("gpu:h100x8")   # 8 H100 SXM GPUs on one host; "gpu:h100x16": two hosts

A TPU or GPU target's devices come from `jax.experimental.topologies.get_topology_desc`
and need that platform's compiler on the machine that compiles: libtpu (`pip install
"libtpu==0.0.42.*"`, jax's [tpu] extra) or jax-cuda12-plugin + jax-cuda12-pjrt (no driver,
no GPU). A mesh over them compiles as usual (`jax.jit(...).lower(...).compile()`), with
the target compiler's memory and cost analyses; nothing runs. Both tables below are data: a
new slice or GPU is one entry (GPU: one target config file in bert_jax/run/gpu_targets/, which
says where it came from).
"""
import dataclasses
import os
import re

import jax


@dataclasses.dataclass(frozen=True)
class TpuSlice:
  """`get_topology_desc` arguments of one TPU slice (the chip grid, how the chips are
  grouped per host, and the chip configuration: "megacore" for v4 / v5p, whose two
  TensorCores act as one device)."""
  topology_name: str
  chip_config_name: str
  chips_per_host_bounds: tuple[int, int, int]


def _slices(generation: str, config: str, shapes: dict[int, str]) -> dict[str, TpuSlice]:
  """`<generation>-<N>` -> its TpuSlice; v4 / v5p count TensorCores (two a chip) in N."""
  per_chip = 2 if config == "megacore" else 1
  out = {}
  for chips, grid in shapes.items():
    host = (1, 1, 1) if chips == 1 else (2, 4, 1) if chips == 8 and per_chip == 1 else (2, 2, 1)
    prefix = {"v5p": "v5"}.get(generation, generation)
    out[f"{generation}-{chips * per_chip}"] = TpuSlice(f"{prefix}:{grid}", config, host)
  return out


_GRID_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
            256: "16x16"}
_GRID_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8",
            256: "4x8x8"}
TPU_SLICES: dict[str, TpuSlice] = {
    **_slices("v4", "megacore", _GRID_3D), **_slices("v5p", "megacore", _GRID_3D),
    **_slices("v5e", "default", _GRID_2D), **_slices("v6e", "default", _GRID_2D),
}

_GPU_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_targets")
# GPU name -> its GpuTargetConfigProto text file in bert_jax/run/gpu_targets/.
GPU_CONFIGS = {"h100": "h100_sxm.txtpb", "a100": "a100_sxm_80.txtpb", "h200": "h200.txtpb"}
GPUS_PER_HOST = 8


def parse(target: str) -> tuple[str, str, int]:
  """"tpu:v5e-16x2" -> ("tpu", "v5e-16", 2 slices); "gpu:h100x16" -> ("gpu", "h100", 16
  GPUs); "host" -> ("host", "", 0). One line naming the target when it is not one."""
  if target == "host":
    return "host", "", 0
  tpu = re.fullmatch(r"tpu:([a-z0-9]+-\d+)(?:x(\d+))?", target)
  if tpu and tpu.group(1) in TPU_SLICES:
    return "tpu", tpu.group(1), int(tpu.group(2) or 1)
  gpu = re.fullmatch(r"gpu:([a-z0-9]+)x(\d+)", target)
  if gpu and gpu.group(1) in GPU_CONFIGS:
    count = int(gpu.group(2))
    if count > GPUS_PER_HOST and count % GPUS_PER_HOST:
      raise ValueError(f"--target={target}: more than {GPUS_PER_HOST} GPUs must be whole "
                       f"hosts of {GPUS_PER_HOST}")
    return "gpu", gpu.group(1), count
  raise ValueError(f"--target={target!r}: expected 'host', 'tpu:<slice>[x<slices>]' with a "
                   f"slice of {sorted(TPU_SLICES)}, or 'gpu:<gpu>x<count>' with a gpu of "
                   f"{sorted(GPU_CONFIGS)}")


def gpu_target_config(gpu: str) -> str:
  """The GpuTargetConfigProto text of `gpu` (a key of GPU_CONFIGS)."""
  with open(os.path.join(_GPU_DIR, GPU_CONFIGS[gpu])) as f:
    return f.read()


def devices(target: str = "host") -> list:
  """The devices of `target` (see the module docstring), in the order a mesh takes them."""
  platform, name, count = parse(target)
  if platform == "host":
    return jax.devices()
  from jax.experimental import topologies
  try:
    if platform == "tpu":
      spec = TPU_SLICES[name]
      if jax.default_backend() != "tpu":
        # Compiling only: no chip to guard, so two compiling programs may both load libtpu
        # (else the second stops on libtpu's multi-process lockfile).
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
      topology = topologies.get_topology_desc(
          platform="tpu", topology_name=spec.topology_name,
          chip_config_name=spec.chip_config_name,
          chips_per_host_bounds=spec.chips_per_host_bounds, num_slices=count,
          wrap=(False, False, False))
    else:
      hosts, per_host = max(1, count // GPUS_PER_HOST), min(count, GPUS_PER_HOST)
      topology = topologies.get_topology_desc(
          platform="cuda", target_config=gpu_target_config(name),
          topology=f"1x{hosts}x{per_host}")
  except Exception as e:  # the compiler plugin is missing or refuses the topology
    need = ('libtpu ("pip install libtpu==0.0.42.*", jax\'s [tpu] extra)' if platform == "tpu"
            else "jax-cuda12-plugin and jax-cuda12-pjrt (the version of jax)")
    raise ValueError(f"--target={target}: cannot describe its devices ({type(e).__name__}: "
                     f"{str(e).splitlines()[0] if str(e) else ''}); compiling for it needs "
                     f"{need}") from e
  return list(topology.devices)
