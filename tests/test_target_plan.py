"""bench/target_plan.py: the per-chip plan from a target's compiler, its largest-batch search
and its roofline estimates."""
import importlib.util
import os

import pytest

from tests.test_targets import needs_libtpu

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "target_plan", os.path.join(REPO, "bench", "target_plan.py"))
target_plan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(target_plan)


def test_largest_batch_doubles_then_bisects_over_the_sharding_multiple(monkeypatch):
  compiled = []

  def fake_plan(row, batch=None):
    compiled.append(batch)
    return {"fits": batch <= 100}

  monkeypatch.setattr(target_plan, "plan", fake_plan)
  row = target_plan.Row("tiny", 128, 8, "host", "data=8")
  assert target_plan.largest_batch(row, {"fits": True}, multiple=8) == 96
  assert compiled[:4] == [16, 32, 64, 128]  # doubling, then bisection between 64 and 128
  compiled.clear()
  too_big = target_plan.Row("tiny", 128, 512, "host", "data=8")
  assert target_plan.largest_batch(too_big, {"fits": False}, multiple=8) == 96
  assert target_plan.largest_batch(too_big, {"fits": False}, multiple=1024) is None


def test_every_row_builds_a_config_its_target_can_take():
  for row in target_plan.ROWS:
    config = target_plan.row_config(row)
    assert config.data.max_seq_length == row.seq <= config.model["max_position_embeddings"]
    mesh = {axis: config.mesh[axis] for axis in ("data", "fsdp", "tensor")}
    assert config.data.batch_size % (mesh["data"] * mesh["fsdp"]) == 0, row
    assert config.model["attention_impl"] == ("splash" if row.target.startswith("tpu")
                                              else target_plan.ATTENTION["gpu"])
  assert target_plan.ATTENTION["gpu"] in ("cudnn", "xla")


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
