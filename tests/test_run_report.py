"""The run report (bert_jax/run/run_report.py): what a run cost, summed over resumes and sweeps."""
import json
import os

import pytest

from bert_jax.core import flops
from bert_jax.run import run_report, trainer
from experiments import tables
from tests.helpers.runs import tiny_pretraining_config


@pytest.mark.slow
def test_pretraining_run_report_counts_steps_tokens_and_flops(corpus, tmp_path):
  workdir = str(tmp_path / "run")
  config = tiny_pretraining_config(corpus, num_train_steps=3, eval_every_steps=0,
                                   eval_batches=1)
  trainer.train_and_evaluate(config, workdir)
  config.num_train_steps = 5  # the same run, continued: a second invocation
  trainer.train_and_evaluate(config, workdir)

  with open(os.path.join(workdir, run_report.FILENAME)) as f:
    data = json.load(f)
  first, second = data["invocations"]
  assert (first["first_step"], first["last_step"]) == (0, 3)
  assert (second["first_step"], second["last_step"]) == (3, 5)
  batch, seq = config.data.batch_size, config.data.max_seq_length
  model_config = trainer.resolve_model_config(config)
  step_flops = flops.pretraining_step_flops(model_config, batch, seq,
                                            config.data.max_predictions_per_seq)
  for entry, steps in ((first, 3), (second, 2)):
    assert entry["tokens"] == steps * batch * seq
    assert entry["model_flops"] == pytest.approx(steps * step_flops)
    assert entry["step_flops"] == pytest.approx(step_flops)
    # XLA's count of the compiled step includes what the analytic count leaves out
    # (softmax, LayerNorm, GELU, the optimizer), and nothing of it is far off.
    assert 1.0 <= entry["step_flops_compiled"] / step_flops < 2.0
    assert 0 < entry["mfu"] < 1
    # Which CPU gave the numbers: MFU and speed ratios differ between CPU models.
    assert entry["device"].endswith(
        f"x cpu ({run_report.cpu_model()}, {len(os.sched_getaffinity(0))} cores)")
    energy = entry["energy"]
    assert energy["method"] == "power_table"  # no energy counters on this machine
    assert energy["kwh"] == pytest.approx(energy["device_kwh"] * run_report.PUE)
    assert energy["co2e_kg"] == pytest.approx(energy["kwh"] * run_report.GRID_GCO2E_PER_KWH
                                              / 1000)
  total = data["total"]
  assert total["steps"] == 5 and total["tokens"] == 5 * batch * seq
  assert total["co2e_kg"] == pytest.approx(first["energy"]["co2e_kg"]
                                           + second["energy"]["co2e_kg"])


def _write_rapl(root, package_uj, core_uj, wrap=1000):
  for name, value in (("intel-rapl:0", package_uj), ("intel-rapl:0:0", core_uj)):
    os.makedirs(root / name, exist_ok=True)
    (root / name / "energy_uj").write_text(str(value))
    (root / name / "max_energy_range_uj").write_text(str(wrap))


def test_rapl_counters_are_read_per_package_across_a_wrap(tmp_path):
  _write_rapl(tmp_path, package_uj=900, core_uj=500)
  meter = run_report.EnergyMeter(rapl_root=str(tmp_path))
  assert meter.method == "rapl"
  _write_rapl(tmp_path, package_uj=100, core_uj=999)  # the package counter wrapped at 1000
  assert meter.joules() == pytest.approx(200 / 1e6)  # the core sub-domain is not added


def test_power_table_estimate_states_its_inputs():
  config = run_report.default_config()
  config.device_watts = 50.0
  config.pue = 1.5
  config.grid_gco2e_per_kwh = 400.0
  energy = run_report.energy_and_co2(3600.0, None, None, config)
  devices = len(__import__("jax").local_devices())
  assert energy["device_kwh"] == pytest.approx(0.05 * devices)
  assert energy["kwh"] == pytest.approx(0.075 * devices)
  assert energy["co2e_kg"] == pytest.approx(0.075 * devices * 0.4)
  assert "config.report.device_watts" in energy["source"]


def test_sweep_total_sums_the_rows_reports():
  rows = [{"run": "a", "report": {"tokens": 10, "model_flops": 1e9, "wall_seconds": 1800,
                                  "kwh": 0.5, "co2e_kg": 0.2}},
          {"run": "b", "report": {"tokens": 5, "model_flops": 2e9, "wall_seconds": 1800,
                                  "kwh": 0.25, "co2e_kg": 0.1}},
          {"run": "old"}]
  line = tables.sweep_total(rows)
  assert line == ("Sweep total (2 of 3 runs with a run report): 15 tokens, 3e+09 model FLOPs, "
                  "1.00 h, 0.75 kWh, 0.3 kg CO2e (2 runs with an energy figure)")
  assert tables.sweep_total([{"run": "old"}]) is None
  rows[1]["same_as"] = "other_sweep/b"  # another sweep's run, its row reused
  assert tables.sweep_total(rows).endswith(
      "; 1 of the runs are another sweep's run (same_as), counted here but spent once")


def test_a_frozen_encoder_counts_its_forward_pass_only():
  """Feature-based runs (freeze_encoder) train the head only: the encoder's FLOPs are one
  forward pass, a third of fine-tuning's (their run reports showed MFU ~200% before)."""
  import numpy as np

  from bert_jax.finetune.conll import ConllTask
  from bert_jax.models.config import BertConfig
  from configs import conll
  model_config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64)
  batch = {"input_ids": np.zeros((4, 16), np.int32)}
  forward = flops.encoder_forward_flops(model_config, 4, 16)
  config = conll.get_config("runlocal=True")
  assert ConllTask(config, model_config).step_flops(batch) == pytest.approx(3 * forward)
  config.freeze_encoder, config.feature_layers = True, "0,1"
  assert ConllTask(config, model_config).step_flops(batch) == pytest.approx(forward)


def test_the_progress_line_gives_the_eta_in_its_two_largest_units():
  from bert_jax.run.metric_writers import format_duration, format_progress
  assert [format_duration(s) for s in (-3, 42, 307, 3 * 3600 + 5 * 60 + 9, 90 * 3600)] == [
      "0s", "42s", "5m07s", "3h05m", "3d18h"]
  line = format_progress(10, 100, {"loss": 2.5, "learning_rate": 1e-4,
                                   "tokens_per_sec": 12345.6}, 5400 * 60)
  assert line == "step 10/100 | loss 2.5000 | lr 1.00e-04 | 12,346 tok/s | ETA 3d18h"
