"""Compiling for TPU and GPU targets on a CPU-only host (bert_jax/run/targets.py): target names,
and a tiny pretraining config's train step compiled by the TPU compiler (libtpu) on a 4-chip
v5e slice with every TPU attention path, and by XLA's GPU compiler (jax-cuda12-plugin) for
2 H100s. The compile tests skip, saying so, where the target's compiler is not installed."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from bert_jax.run import targets
from bert_jax.models.config import config_for_size
from bert_jax.weights import hf_families
from configs import base
from tests.helpers.runs import set_fields

from tests.helpers.targets import needs_cuda_plugin, needs_cudnn, needs_libtpu


def test_target_names():
  assert targets.parse("host") == ("host", "", 0)
  assert targets.parse("tpu:v5e-16") == ("tpu", "v5e-16", 1)
  assert targets.parse("tpu:v5p-8x2") == ("tpu", "v5p-8", 2)
  assert targets.parse("gpu:h100x8") == ("gpu", "h100", 8)
  assert targets.TPU_SLICES["v4-8"] == targets.TpuSlice("v4:2x2x1", "megacore", (2, 2, 1))
  assert targets.TPU_SLICES["v5e-16"] == targets.TpuSlice("v5e:4x4", "default", (2, 2, 1))
  assert targets.TPU_SLICES["v6e-8"] == targets.TpuSlice("v6e:2x4", "default", (2, 4, 1))
  for bad in ("tpu:v5e-12", "tpu:v7-8", "gpu:h100", "gpu:rtx9x1", "cpu"):
    with pytest.raises(ValueError, match="expected 'host'"):
      targets.parse(bad)
  with pytest.raises(ValueError, match="whole hosts of 8"):
    targets.parse("gpu:h100x12")
  for gpu in targets.GPU_CONFIGS:  # every stored target config says where it came from
    assert "Source: openxla/xla" in targets.gpu_target_config(gpu)


def _tiny_config(impl: str, mesh: dict):
  """configs/base.py at H32, 2 heads, 1 layer, T128 (splash's smallest), batch 8."""
  return set_fields(base.get_config(), {
      "model.hidden_size": 32, "model.intermediate_size": 64, "model.num_attention_heads": 2,
      "model.num_hidden_layers": 1, "model.attention_impl": impl,
      "model.attention_probs_dropout_prob": 0.0 if impl != "einsum" else 0.1,
      "data.max_seq_length": 128, "data.max_predictions_per_seq": 5, "data.batch_size": 8,
      **{f"mesh.{axis}": size for axis, size in mesh.items()}})


@pytest.mark.slow
@needs_libtpu
@pytest.mark.parametrize("impl,mesh", [
    ("einsum", {"fsdp": 4}), ("splash", {"fsdp": 4}), ("splash", {"data": 2, "tensor": 2})])
def test_train_step_compiles_for_a_tpu_slice(impl, mesh):
  """The TPU compiler's memory analysis of the step on v5e-4; splash compiles as Mosaic TPU
  kernels under shard_map (not its interpreter: the platform is the mesh's, not the compiling machine's),
  where before it stopped with 'Mosaic kernels cannot be automatically partitioned'."""
  from bert_jax.run import compile_report
  config = _tiny_config(impl, mesh)
  setup, lowered, _ = compile_report.lower_train_step(config, "tpu:v5e-4")
  assert setup.mesh.devices.flat[0].platform == "tpu" and setup.mesh.size == 4
  text = lowered.as_text()
  assert ("tpu_custom_call" in text) == (impl == "splash")
  compiled = lowered.compile()
  memory = compiled.memory_analysis()
  assert memory.argument_size_in_bytes > 0 and memory.generated_code_size_in_bytes > 0
  assert compiled.cost_analysis()["flops"] > 0


# Every family member's pretraining config but BERT's (the tests above) and DistilBERT's (its
# config reads a trained teacher's workdir; its student is BERT's encoder).
FAMILY_CONFIGS = ("roberta", "albert", "electra", "modernbert", "spanbert", "ernie", "reformer")


@pytest.mark.slow
@needs_libtpu
@pytest.mark.parametrize("name", FAMILY_CONFIGS)
def test_every_family_configs_train_step_compiles_for_a_tpu_slice(name):
  """configs/NAME.py:runlocal=True (its family, objectives and attention: ModernBERT's
  global and sliding-window layers, Reformer's local and LSH layers, ALBERT's shared
  layer, ELECTRA's generator beside its discriminator), one layer of each kind, sharded
  fsdp=4 over a v5e-4 slice and compiled by the TPU compiler."""
  from bert_jax.run import compile_report
  config = importlib.import_module(f"configs.{name}").get_config("runlocal=True")
  layers = {"modernbert": 2, "reformer": 2}.get(name, 1)  # a global and a local layer
  set_fields(config, {"mesh.fsdp": 4, "mesh.data": 1, "model.num_hidden_layers": layers})
  report = compile_report.compile_report(config, "tpu:v5e-4")
  assert report["platform"] == "tpu" and report["devices"] == 4
  assert report["peak_bytes_per_device"] > 0 and report["xla_flops_per_device"] > 0


@pytest.mark.slow
@needs_libtpu
def test_compile_report_for_a_tpu_target_counts_the_target_devices():
  """The report of the xla attention path's step on v5e-4 (data x fsdp = 2 x 2)."""
  from bert_jax.run import compile_report
  report = compile_report.compile_report(_tiny_config("xla", {"data": 2, "fsdp": 2}),
                                         "tpu:v5e-4")
  assert report["devices"] == 4 and report["platform"] == "tpu"
  assert report["device_kind"].startswith("TPU v5")
  assert report["xla_flops_per_device"] > 0 and report["peak_bytes_per_device"] > 0
  assert "tpu:v5e-4: mesh" in compile_report.format_report(report)


@pytest.mark.slow
@needs_libtpu
def test_a_step_too_big_for_the_tpu_is_reported_as_refused_not_raised():
  """libtpu refuses a program over a chip's HBM (RESOURCE_EXHAUSTED); the report says so,
  with the bytes the compiler needs and has per chip, and `--compile_only` prints it."""
  from bert_jax.run import compile_report
  config = set_fields(_tiny_config("einsum", {"fsdp": 4}), {  # [B, N, T, T] scores: 32 GiB
      "data.batch_size": 1 << 15, "data.max_seq_length": 512, "data.max_predictions_per_seq": 20})
  report = compile_report.compile_report(config, "tpu:v5e-4")
  assert "RESOURCE_EXHAUSTED" in report["out_of_memory"], report
  need = report["temp_bytes_per_device"] or report["peak_bytes_per_device"]
  assert need > report["compiler_hbm_bytes_per_device"] > 10 * 2 ** 30  # of v5e's 16 GiB
  assert report["xla_flops_per_device"] is None and report["devices"] == 4
  text = compile_report.format_report(report)
  assert "does not fit: the compiler needs" in text and "peak_bytes_per_device" in text


@pytest.mark.slow
@needs_libtpu
def test_compile_only_for_a_tpu_target_prints_the_refusal_and_exits_1(tmp_path):
  """The scaling guide's `--compile_only --target=tpu:...` path, end to end in a process of its
  own (libtpu's folder appended to its path, as this process has it): a batch too big for
  v5e-4 prints the report's `does not fit` line and exits 1."""
  site = os.environ.get("BERT_JAX_TARGETS_SITE", "")
  argv = ["bert_jax.train", "--config=configs/base.py", f"--workdir={tmp_path}",
          "--compile_only", "--target=tpu:v5e-4", "--config.mesh.data=1",
          "--config.mesh.fsdp=4", "--config.model.hidden_size=32",
          "--config.model.intermediate_size=64", "--config.model.num_attention_heads=2",
          "--config.model.num_hidden_layers=1", "--config.model.attention_impl=einsum",
          "--config.model.attention_probs_dropout_prob=0", "--config.data.batch_size=32768",
          "--config.data.max_seq_length=512", "--config.data.max_predictions_per_seq=20"]
  code = (f"import runpy, sys; sys.path.append({site!r}) if {site!r} else None; "
          f"sys.argv = {argv!r}; runpy.run_module('bert_jax.train', run_name='__main__')")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        timeout=600)
  assert done.returncode == 1, done.stderr[-2000:]
  assert "tpu:v5e-4: mesh" in done.stdout and "does not fit: the compiler needs" in done.stdout


@pytest.mark.slow
@needs_cuda_plugin
def test_train_step_compiles_for_gpus():
  """XLA's GPU compiler (sm_90 code for 2 H100s, no GPU here): memory analysis, no cost
  analysis; the report says n/a for the compiler's FLOPs."""
  from bert_jax.run import compile_report
  report = compile_report.compile_report(_tiny_config("xla", {"fsdp": 2}), "gpu:h100x2")
  assert report["devices"] == 2 and report["platform"] == "gpu"
  assert report["device_kind"] == "NVIDIA H100 80GB HBM3"
  assert report["temp_bytes_per_device"] > 0 and report["xla_flops_per_device"] is None
  assert "n/a" in compile_report.format_report(report)


@pytest.mark.slow
@needs_cudnn
@pytest.mark.parametrize("mesh", [{"fsdp": 4}, {"data": 2, "tensor": 2}])
def test_cudnn_attention_compiles_for_gpus_under_a_mesh(mesh):
  """cuDNN's flash attention (bf16) in the train step for 4 H100s, with no GPU here: its
  forward and backward kernels are in the compiled program under fsdp (BERT) and data x
  tensor (ModernBERT, global and sliding-window layers) meshes (the model's init is traced
  for the mesh's platform, not the host's)."""
  from bert_jax.run import compile_report
  config = set_fields(_tiny_config("cudnn", mesh), {"model.dtype": "bfloat16"})
  if "tensor" in mesh:  # ModernBERT: a global and a sliding-window layer (a bias for cuDNN)
    config.model = dict(config_for_size("modernbert-tiny").to_json_dict(), hidden_size=32,
                        num_attention_heads=2, intermediate_size=48, num_hidden_layers=2,
                        local_attention=16, max_position_embeddings=128, dtype="bfloat16",
                        attention_impl="cudnn", attention_probs_dropout_prob=0.0)
    config.objectives = "mlm"
  setup, lowered, _ = compile_report.lower_train_step(config, "gpu:h100x4")
  assert setup.mesh.devices.flat[0].platform == "gpu" and setup.mesh.size == 4
  compiled = lowered.compile()
  assert compiled.as_text().count("__cudnn$fmha") >= 2  # forward and backward
  assert compiled.memory_analysis().temp_size_in_bytes > 0


@needs_cudnn
def test_cudnn_attention_in_float32_is_a_one_line_error_naming_the_dtype():
  """configs/base.py computes in float32; cuDNN's flash kernel takes float16/bfloat16 only.
  Traced for an H100, the step stops at the attention with the field to change, not with
  the kernel's NotImplementedError from inside jax."""
  from bert_jax.run import compile_report
  with pytest.raises(ValueError, match=r"attention_impl='cudnn' runs in float16 or bfloat16; "
                     r"the model computes in float32 \(model.dtype\)"):
    compile_report.lower_train_step(_tiny_config("cudnn", {"fsdp": 1}), "gpu:h100x1")


@pytest.mark.slow
@needs_libtpu
def test_two_programs_compiling_for_a_tpu_at_once_both_get_its_devices():
  """libtpu guards a machine's chips with a lockfile; compiling for a TPU from a machine
  without one, a second program (a test worker, a planning script beside a run) must still
  load it."""
  import os
  import subprocess
  import sys
  assert len(targets.devices("tpu:v5e-4")) == 4  # this process holds libtpu
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
  env.pop("ALLOW_MULTIPLE_LIBTPU_LOAD", None)
  proc = subprocess.run(
      [sys.executable, "-c", "from bert_jax.run import targets; "
       "print(len(targets.devices('tpu:v5e-4')))"],
      env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and proc.stdout.split()[-1] == "4", proc.stderr[-600:]


# The family configs' paper-scale variants (tests/test_paper_recipes.py holds their values).
# Reformer's enwik8 variant (12 reversible layers, unrolled: they refuse scan) compiles in
# about 80 s on 2 CPU cores, linear in depth (15 / 19 / 33 / 56 / 81 s at 1 / 2 / 4 / 8 /
# 12 layers).
PAPER_VARIANTS = (("roberta", "base"), ("electra", "small"), ("electra", "base"),
                  ("electra", "large"), ("albert", "base"), ("albert", "large"),
                  ("albert", "xxlarge"), ("spanbert", "large"), ("modernbert", "base"),
                  ("ernie", "base"), ("distilbert", "base"), ("reformer", "enwik8"))


@pytest.mark.slow
@needs_libtpu
@pytest.mark.parametrize("name,size", PAPER_VARIANTS)
def test_paper_variants_train_step_compiles_for_a_tpu_slice(name, size, tmp_path):
  """configs/NAME.py:size=SIZE,runlocal=True (the paper's architecture, bf16 compute, its
  optimizer; T64, batch 8), layers scanned (but Reformer's, reversible and unrolled, and
  DistilBERT's, copied one by one from its config-only teacher),
  sharded fsdp=4 over a v5e-4 slice and compiled by the TPU compiler."""
  from bert_jax.run import compile_report
  arg = f"size={size},runlocal=True"
  if name == "distilbert":  # its BERT-base teacher's architecture only: no weights are read
    teacher = tmp_path / "bert-base-uncased"
    teacher.mkdir()
    (teacher / "config.json").write_text(
        json.dumps(hf_families.config_to_hf(config_for_size("base"))))
    arg += f",teacher={teacher}"
  config = importlib.import_module(f"configs.{name}").get_config(arg)
  set_fields(config, {"mesh.fsdp": 4, "mesh.data": 1,
                      "model.scan_layers": name not in ("reformer", "distilbert")})
  report = compile_report.compile_report(config, "tpu:v5e-4")
  assert report["platform"] == "tpu" and report["devices"] == 4
  assert report["peak_bytes_per_device"] > 0 and report["xla_flops_per_device"] > 0
