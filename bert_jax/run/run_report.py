"""The run report: what a training run cost, written at its end as WORKDIR/run_report.json.

Per invocation of the trainer (a resumed run has several) and summed over them:
  steps, tokens (every position of every row, padding included, as tokens_per_sec counts
    them), wall and train-loop seconds;
  model FLOPs (bert_jax.core.flops, summed over the steps actually run) and, for the last
    batch shape, the analytic FLOPs of one step beside XLA's compiled cost analysis of it;
  achieved FLOP/s and MFU against the peak `flops.device_peak_flops` uses;
  energy (kWh) and CO2e (kg), with the method and every input stated.

Energy, in order of preference (`method` says which):
  "nvml": the GPUs' own energy counters (NVIDIA NVML total energy, needs `pynvml`);
  "rapl": the CPU packages' RAPL energy counters (/sys/class/powercap/intel-rapl:N);
  "power_table": wall time x a power figure: the accelerator's board power (TDP) from
    POWER_WATTS, or for a CPU host the cores this process may use x
    config.report.cpu_watts_per_core; config.report.device_watts overrides either.
  Then x PUE (datacenter overhead) x grid carbon intensity, both config fields:
  defaults 1.58 (Uptime Institute's industry-average PUE, as in Strubell et al. 2019)
  and 480 gCO2e/kWh (world average electricity 2023, Ember Global Electricity Review
  2024). These are estimates: set the PUE and the intensity of where the run was.

The figures are estimates of the run's own devices only (no storage, network or host
memory), stated as such in the report.
"""
import dataclasses
import glob
import json
import os
import platform
import time
from typing import Optional

import jax
import ml_collections

from bert_jax.files import storage

# Board power / TDP per device (W), by a substring of jax's device_kind.
POWER_WATTS = {
    "H100": 700.0, "H200": 700.0, "A100": 400.0, "V100": 300.0, "L4": 72.0, "T4": 70.0,
    "TPU v4": 192.0,
}
# A server CPU core's share of its package TDP: AMD EPYC 7763, 280 W / 64 cores.
CPU_WATTS_PER_CORE = 280.0 / 64
PUE = 1.58
GRID_GCO2E_PER_KWH = 480.0

FILENAME = "run_report.json"


def default_config() -> ml_collections.ConfigDict:
  """config.report: the inputs of the energy and CO2e estimate (see the module doc)."""
  return ml_collections.ConfigDict(dict(
      pue=PUE,  # the datacenter's power usage effectiveness (total power / IT power)
      grid_gco2e_per_kwh=GRID_GCO2E_PER_KWH,  # the grid's carbon intensity where the run was
      device_watts=0.0,  # > 0: the power figure of each device, instead of the table's
      cpu_watts_per_core=CPU_WATTS_PER_CORE,  # a CPU host's power per core in use (no counters)
  ))


# ---------------------------------------------------------------------------- energy
def _rapl_counters(root: str) -> Optional[dict[str, tuple[int, int]]]:
  """{package: (energy_uj, max_energy_range_uj)} of the top-level RAPL domains, or None."""
  counters = {}
  for domain in sorted(glob.glob(os.path.join(root, "intel-rapl:[0-9]*"))):
    if ":" in os.path.basename(domain).split("intel-rapl:", 1)[1]:
      continue  # a sub-domain (core, dram) of a package, counted inside it
    try:
      with open(os.path.join(domain, "energy_uj")) as f:
        energy = int(f.read())
      with open(os.path.join(domain, "max_energy_range_uj")) as f:
        wrap = int(f.read())
    except (OSError, ValueError):
      return None  # present but unreadable (permissions): not a measurement
    counters[domain] = (energy, wrap)
  return counters or None


def _nvml_energy_joules() -> Optional[float]:
  """Total energy counter of every visible NVIDIA GPU (J), or None without NVML."""
  try:
    import pynvml  # optional (nvidia-ml-py); not a dependency
  except ImportError:
    return None
  try:
    pynvml.nvmlInit()
    total_mj = sum(pynvml.nvmlDeviceGetTotalEnergyConsumption(
        pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount()))
  except Exception:  # no library, no driver, or a GPU without the counter
    return None
  return total_mj / 1000.0


class EnergyMeter:
  """Reads the energy counters the machine has at start and at `joules()`; None if none.

  rapl_root: where RAPL domains live (a test points it at a fake tree).
  """

  def __init__(self, rapl_root: str = "/sys/class/powercap"):
    self.rapl_root = rapl_root
    self.method = None
    self._start = None
    if jax.devices()[0].platform == "gpu" and (start := _nvml_energy_joules()) is not None:
      self.method, self._start = "nvml", start
    elif (start := _rapl_counters(rapl_root)) is not None:
      self.method, self._start = "rapl", start

  def joules(self) -> Optional[float]:
    """Energy used since the meter was made, by the counters; None without counters."""
    if self.method == "nvml":
      now = _nvml_energy_joules()
      return None if now is None else now - self._start
    if self.method == "rapl":
      now = _rapl_counters(self.rapl_root)
      if now is None or now.keys() != self._start.keys():
        return None
      micro = 0
      for domain, (energy, wrap) in now.items():
        before = self._start[domain][0]
        micro += energy - before if energy >= before else energy + wrap - before
      return micro / 1e6
    return None


def cpu_model() -> str:
  """The host CPU's model name (/proc/cpuinfo's "model name"), else platform.processor()."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown CPU"


def device_description() -> str:
  """'N x <device kind>'; on CPU also the model and the cores this process may use
  (benchmark ratios differ between CPU models, so every number says which one it had)."""
  devices = jax.devices()
  text = f"{len(devices)} x {devices[0].device_kind}"
  if devices[0].platform == "cpu":
    text += f" ({cpu_model()}, {len(os.sched_getaffinity(0))} cores)"
  return text


def table_watts(report_config) -> tuple[float, str]:
  """(watts of the devices this process runs on, how the figure was made)."""
  devices = jax.local_devices()
  if report_config.device_watts:
    return (report_config.device_watts * len(devices),
            f"{len(devices)} x {report_config.device_watts} W (config.report.device_watts)")
  if devices[0].platform == "cpu":
    cores = len(os.sched_getaffinity(0))
    return (cores * report_config.cpu_watts_per_core,
            f"{cores} CPU cores x {report_config.cpu_watts_per_core:.2f} W per core "
            "(config.report.cpu_watts_per_core)")
  kind = devices[0].device_kind
  for name, watts in POWER_WATTS.items():
    if name.lower() in kind.lower():
      return watts * len(devices), f"{len(devices)} x {watts} W ({kind} board power)"
  raise ValueError(f"config.report.device_watts: no power figure for device {kind!r}; set "
                   "it to the device's power in W")


def energy_and_co2(seconds: float, measured_joules: Optional[float], method: Optional[str],
                   report_config) -> dict:
  """The energy/CO2e block of a report: kWh, kg CO2e and every input used."""
  if measured_joules is not None:
    device_kwh, source = measured_joules / 3.6e6, f"measured by the {method} energy counters"
  else:
    try:
      watts, source = table_watts(report_config)
    except ValueError as e:
      return {"method": "unknown", "note": str(e)}
    device_kwh, method = watts * seconds / 3.6e6, "power_table"
    source = f"{source} x {seconds:.1f} s"
  kwh = device_kwh * report_config.pue
  return {"method": method, "device_kwh": device_kwh, "source": source,
          "pue": report_config.pue, "kwh": kwh,
          "grid_gco2e_per_kwh": report_config.grid_gco2e_per_kwh,
          "co2e_kg": kwh * report_config.grid_gco2e_per_kwh / 1000.0}


# ---------------------------------------------------------------------------- report
@dataclasses.dataclass
class Invocation:
  """What one call of the trainer did; filled in by the training loop."""
  started: float = dataclasses.field(default_factory=time.time)
  first_step: int = 0
  steps: int = 0
  tokens: int = 0
  model_flops: float = 0.0
  train_seconds: float = 0.0  # the loop, first (compiling) step included
  # After the first step (compilation excluded): what MFU is measured on.
  steady_flops: float = 0.0
  steady_seconds: float = 0.0


def compiled_flops(jitted, *args) -> Optional[float]:
  """XLA's cost analysis of `jitted` on args (already compiled: a cache hit), or None."""
  try:
    analysis = jitted.lower(*args).compile().cost_analysis()
  except Exception:  # a backend without cost analysis
    return None
  if isinstance(analysis, (list, tuple)):
    analysis = analysis[0] if analysis else None
  flops = (analysis or {}).get("flops")
  return None if flops is None or flops < 0 else float(flops)


def invocation_report(invocation: Invocation, *, step_flops: float,
                      step_flops_compiled: Optional[float], peak_flops: float,
                      meter: EnergyMeter, report_config, stopped_by: Optional[str],
                      data_notes=()) -> dict:
  """One invocation's report (a JSON-able dict); data_notes: one line per file whose bad
  records were skipped (config.data.skip_bad_rows), kept as "data_notes"."""
  wall = time.time() - invocation.started
  achieved = (invocation.steady_flops / invocation.steady_seconds
              if invocation.steady_seconds > 0 else None)
  report = {
      "first_step": invocation.first_step, "last_step": invocation.first_step + invocation.steps,
      "steps": invocation.steps, "tokens": invocation.tokens,
      "wall_seconds": wall, "train_seconds": invocation.train_seconds,
      "model_flops": invocation.model_flops,
      "step_flops": step_flops, "step_flops_compiled": step_flops_compiled,
      # FLOP/s and MFU of the steps after the first (which compiles)
      "achieved_flops_per_sec": achieved, "peak_flops_per_sec": peak_flops,
      "mfu": achieved / peak_flops if achieved is not None and peak_flops else None,
      "device": device_description(),
      "energy": energy_and_co2(wall, meter.joules(), meter.method, report_config),
  }
  if stopped_by:
    report["stopped_by"] = stopped_by
  if data_notes:
    report["data_notes"] = list(data_notes)
  return report


def total(invocations: list[dict]) -> dict:
  """Sums over invocations (or over a sweep's runs): steps, tokens, time, FLOPs, energy."""
  def add(get):
    values = [get(r) for r in invocations]
    return None if any(v is None for v in values) else sum(values)

  return {
      "invocations": len(invocations),
      "steps": add(lambda r: r["steps"]),
      "tokens": add(lambda r: r["tokens"]),
      "wall_seconds": add(lambda r: r["wall_seconds"]),
      "train_seconds": add(lambda r: r["train_seconds"]),
      "model_flops": add(lambda r: r["model_flops"]),
      "kwh": add(lambda r: r["energy"].get("kwh")),
      "co2e_kg": add(lambda r: r["energy"].get("co2e_kg")),
  }


def append(workdir: str, report: dict) -> dict:
  """Adds an invocation to WORKDIR/run_report.json (its total recomputed); returns the file."""
  path = storage.join(workdir, FILENAME)
  invocations = []
  if storage.exists(path):
    invocations = json.loads(storage.read_text(path))["invocations"]
  # A rerun after a crash may repeat steps a lost invocation had: keep what ran before.
  invocations = [r for r in invocations if r["last_step"] <= report["first_step"]] + [report]
  data = {"total": total(invocations), "invocations": invocations}
  storage.write_text(path, json.dumps(data, indent=2))  # whole (a .tmp renamed on disk)
  return data


def summary_line(report: dict) -> str:
  """One human line of an invocation's report."""
  energy = report["energy"]
  parts = [f"{report['steps']} steps", f"{report['tokens']:,} tokens",
           f"{report['wall_seconds']:.0f} s", f"{report['model_flops']:.3g} model FLOPs"]
  if report["mfu"] is not None:
    parts.append(f"MFU {report['mfu']:.1%}")
  if "kwh" in energy:
    parts.append(f"{energy['kwh'] * 1000:.3g} Wh, {energy['co2e_kg'] * 1000:.3g} g CO2e "
                 f"({energy['method']})")
  if report.get("data_notes"):
    parts.append(f"bad records skipped in {len(report['data_notes'])} file(s) (data_notes)")
  return "run report: " + ", ".join(parts)
