"""bench/target_plan.py: the per-chip plan from a target's compiler, its largest-batch search
and its roofline estimates."""
import importlib.util
import os

import pytest

from tests.helpers.targets import needs_libtpu

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "target_plan", os.path.join(REPO, "bench", "target_plan.py"))
target_plan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(target_plan)


def _search(monkeypatch, peak, start, multiple, hbm=32.0, cap=1 << 16, **options):
  """largest_batch with a fake compiler whose per-chip peak is peak(batch): the answer and
  the batches it compiled."""
  compiled = []

  def fake_plan(row, batch=None):
    compiled.append(batch)
    return {"fits": peak(batch) <= hbm, "peak_bytes_per_device": peak(batch)}

  monkeypatch.setattr(target_plan, "plan", fake_plan)
  row = target_plan.Row("tiny", 128, start, "host", "data=8")
  first = {"fits": peak(start) <= hbm, "peak_bytes_per_device": peak(start), "hbm_bytes": hbm}
  found, over = target_plan.largest_batch(row, first, multiple, cap, **options)
  assert over is None or (peak(over) > hbm and over in compiled)  # bracketed by compiles
  return found, compiled


def test_largest_batch_follows_a_linear_peak_in_three_compiles(monkeypatch):
  """Fixed weights plus activations per row: 2 + b / 4 reaches 32 at b = 120."""
  linear = lambda b: 2 + b / 4  # noqa: E731
  assert _search(monkeypatch, linear, 16, 8) == (120, [80, 120, 128])
  found, compiled = _search(monkeypatch, linear, 512, 8)  # the row's batch does not fit
  assert found == 120 and len(compiled) <= 3, compiled


@pytest.mark.parametrize("start", [8, 16, 256, 4096])
@pytest.mark.parametrize("name,peak", [
    ("linear", lambda b: 0.7 + 0.031 * b),
    ("quadratic", lambda b: 1 + (b / 40) ** 2),
    # flat, then a cliff (a layout the compiler switches at some batch): no line helps
    ("cliff", lambda b: 4.0 if b <= 1000 else 64.0),
    ("noisy", lambda b: 0.5 + 0.03 * b + (3.0 if b % 24 == 0 else 0.0)),
])
def test_largest_batch_is_the_last_fit_before_the_first_miss(monkeypatch, name, peak, start):
  """Whatever the peak's shape, the answer is bracketed by compiles: it fits and the next
  multiple up does not (the largest for a monotone peak), in at most twice the compiles
  of bisection (plus the first few while no compile misses)."""
  multiple, cap = 8, 1 << 14
  found, compiled = _search(monkeypatch, peak, start, multiple, cap=cap)
  batches = range(multiple, cap + 1, multiple)
  if name != "noisy":
    assert found == max(b for b in batches if peak(b) <= 32.0), (name, start, compiled)
  assert peak(found) <= 32.0 and peak(found + multiple) > 32.0, (found, compiled)
  assert found in compiled or found == start
  assert len(compiled) <= 2 * 11 + 4, compiled


def _rematerialising(b):
  """The TPU compiler near its limit: linear to 28 GiB, then held there by recomputing
  activations, until at 20,000 rows even that does not fit (BERT-Base on v4-8 held
  28.5-28.8 GiB per chip from batch 2,696 to 6,848)."""
  return min(4 + b / 100, 28.0) if b <= 20000 else 4 + b / 100


def test_largest_batch_within_a_tolerance_where_the_compiler_rematerialises(monkeypatch):
  found, compiled = _search(monkeypatch, _rematerialising, 256, 4, tolerance=0.05)
  assert 20000 / 1.05 <= found <= 20000 and len(compiled) <= 12, compiled
  exact, compiled = _search(monkeypatch, _rematerialising, 256, 4)
  assert exact == 20000 and len(compiled) <= 2 * 13 + 4, compiled


def test_largest_batch_from_a_bracket_of_earlier_compiles(monkeypatch):
  found, compiled = _search(monkeypatch, _rematerialising, 256, 4, tolerance=0.05,
                            bracket=(6848, 27932))
  assert 20000 / 1.05 <= found <= 20000 and len(compiled) <= 6, compiled
  assert 6848 not in compiled and 27932 not in compiled


def test_largest_batch_counts_a_compile_the_compiler_refused_as_a_miss(monkeypatch):
  """libtpu refuses a program over its own limit (30 of the chip's 32 here) with
  RESOURCE_EXHAUSTED and the temporaries it needs: no peak, not a fit, and the line aims
  at the compiler's limit from then on."""
  compiled = []

  def fake_plan(row, batch=None):
    compiled.append(batch)
    peak = 2 + batch / 4
    if peak > 30:
      return {"fits": False, "out_of_memory": "RESOURCE_EXHAUSTED: ...", "peak_bytes_per_device":
              None, "temp_bytes_per_device": peak - 1, "params_bytes_per_device": 0.5,
              "opt_state_bytes_per_device": 0.5, "compiler_hbm_bytes_per_device": 30}
    return {"fits": True, "peak_bytes_per_device": peak}

  monkeypatch.setattr(target_plan, "plan", fake_plan)
  row = target_plan.Row("tiny", 128, 16, "host", "data=8")
  first = {"fits": True, "peak_bytes_per_device": 6, "hbm_bytes": 32}
  trail = []
  assert target_plan.largest_batch(row, first, 8, trail=trail) == (112, 120)
  assert {(t["batch"], t["fits"], t["refused"]) for t in trail} >= {
      (112, True, False), (120, False, True)}
  assert len(compiled) <= 4, compiled


def test_a_refused_row_is_a_row_of_the_table():
  refused = {"row": {"model": "base", "seq": 128, "target": "tpu:v4-8", "mesh": "fsdp=4"},
             "global_batch": 16384, "out_of_memory": "RESOURCE_EXHAUSTED: ...",
             "temp_bytes_per_device": 66.57 * 2 ** 30, "peak_bytes_per_device": None,
             "compiler_hbm_bytes_per_device": 30.75 * 2 ** 30, "hbm_bytes": 32 * 2 ** 30}
  for with_max_batch in (False, True):
    head, rule, line = target_plan.table([refused], with_max_batch).splitlines()
    assert line.count("|") == head.count("|") == rule.count("|")
    assert "| > 30.75 (refused: needs 66.57) | 32 | no |" in line


def test_largest_batch_is_none_when_the_smallest_batch_does_not_fit(monkeypatch):
  found, compiled = _search(monkeypatch, lambda b: 40 + b, 64, 8)
  assert found is None and compiled[-1] == 8


def test_the_bound_counts_the_larger_of_the_compilers_and_the_models_flops(monkeypatch):
  """A compiler that counts fewer FLOPs than the model's (splash's kernel is opaque to its
  cost analysis) cannot give an MFU ceiling above 100%: the bound takes the model's."""
  report = {"device_kind": "TPU v6 lite", "devices": 8, "global_batch": 256, "seq_len": 512,
            "peak_bytes_per_device": 2 ** 30, "model_flops_per_step": 8 * 918e12,
            "xla_flops_per_device": 0.8 * 918e12, "xla_bytes_accessed_per_device": 1e9}
  monkeypatch.setattr(target_plan.compile_report, "compile_report", lambda *_: dict(report))
  row = target_plan.Row("base", 512, 256, "tpu:v6e-8", "fsdp=8")
  result = target_plan.plan(row)
  assert result["bound_from"] == "model flops" and result["bound_seconds"] == 1.0
  assert result["mfu_ceiling"] == 1.0
  report["xla_flops_per_device"] = 2 * 918e12  # the compiler's count, when larger
  result = target_plan.plan(row)
  assert result["bound_from"] == "compiler flops" and result["bound_seconds"] == 2.0
  assert result["mfu_ceiling"] == 0.5
  report["xla_bytes_accessed_per_device"] = 3 * 1640e9  # three seconds of HBM traffic
  assert target_plan.plan(row)["bound_from"] == "bytes"


def test_every_row_builds_a_config_its_target_can_take():
  for row in target_plan.ROWS:
    config = target_plan.row_config(row)
    assert config.data.max_seq_length == row.seq <= config.model["max_position_embeddings"]
    mesh = {axis: config.mesh[axis] for axis in ("data", "fsdp", "tensor")}
    assert config.data.batch_size % (mesh["data"] * mesh["fsdp"]) == 0, row
    assert config.model["attention_impl"] == ("splash" if row.target.startswith("tpu")
                                              else target_plan.ATTENTION["gpu"])
  assert target_plan.ATTENTION["gpu"] in ("cudnn", "xla")


def test_a_float32_model_takes_xla_attention_on_gpus_where_cudnn_would_refuse_it():
  gpu = target_plan.ATTENTION["gpu"]
  assert target_plan.fused_attention("gpu:h100x8") == gpu  # bf16, as the table rows compute
  assert target_plan.fused_attention("gpu:h100x8", "bfloat16") == gpu
  assert target_plan.fused_attention("gpu:h100x8", "float32") == "xla"
  assert target_plan.fused_attention("gpu:h100x8", None) == "xla"  # a config's default
  assert target_plan.fused_attention("tpu:v5e-8", "float32") == "splash"


def test_rows_are_chosen_by_the_start_of_the_model_name_and_the_target():
  models = lambda *args: {(r.model, r.seq, r.target) for r in target_plan.select(  # noqa: E731
      target_plan.ROWS, *args)}
  assert models("large", "tpu:v6e-8") == {("large", 128, "tpu:v6e-8"),
                                          ("large", 512, "tpu:v6e-8")}  # not albert-xxlarge
  assert {m for m, _, _ in models("base")} == {"base"}  # not modernbert-base
  assert models("modernbert", "gpu:h100x8") == {("modernbert-base", 512, "gpu:h100x8"),
                                                ("modernbert-base", 8192, "gpu:h100x8")}
  assert len(target_plan.select(target_plan.ROWS)) == len(target_plan.ROWS)
  assert target_plan.select(target_plan.ROWS, "bert-base") == []


@pytest.mark.slow
@needs_libtpu
def test_a_tiny_row_on_a_tpu_slice_has_the_compilers_facts_and_a_bound():
  row = target_plan.Row("tiny", 128, 8, "tpu:v5e-4", "fsdp=4")
  result = target_plan.plan(row)
  assert result["device_kind"].startswith("TPU v5") and result["devices"] == 4
  assert result["fits"] and result["hbm_bytes"] == 16 * 2 ** 30
  assert result["xla_flops_per_device"] > 0 and result["bound_seconds"] > 0
  assert 0 < result["mfu_ceiling"] <= 1 and result["tokens_per_s_per_chip"] > 0
  assert "| tiny | 128 | tpu:v5e-4 | fsdp=4 | 8 |" in target_plan.table([result], False)
