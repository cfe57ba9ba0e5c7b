"""scripts/tpu_vm.sh: the gcloud commands each step prints with --dry_run (read back as a
shell reads them), its slice table against bert_jax/run/targets.py's, and its refusals."""
import math
import os
import re
import shlex
import subprocess

import pytest

from bert_jax.run import targets

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "tpu_vm.sh")
WHERE = ["--name=bert", "--zone=us-central2-b"]


def dry(*args) -> list[list[str]]:
  """Each printed command as its argv (comment lines left out)."""
  result = subprocess.run(["bash", SCRIPT, *args, "--dry_run"] if "--" not in args else
                          ["bash", SCRIPT, *args[:args.index("--")], "--dry_run",
                           *args[args.index("--"):]], capture_output=True, text=True)
  assert result.returncode == 0, result.stderr
  return [shlex.split(line) for line in result.stdout.splitlines() if not line.startswith("#")]


def refusal(*args) -> str:
  result = subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True)
  assert result.returncode == 2 and not result.stdout, (result.returncode, result.stdout)
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("tpu_vm.sh: error: "), result.stderr
  return lines[0]


@pytest.mark.parametrize("slice_name, accelerator, version", [
    ("v4-16", "v4-16", "tpu-ubuntu2204-base"), ("v5p-8", "v5p-8", "v2-alpha-tpuv5"),
    ("v5e-16", "v5litepod-16", "v2-alpha-tpuv5-lite"), ("v6e-8", "v6e-8", "v2-alpha-tpuv6e")])
def test_create_names_gclouds_accelerator_type_and_software_version(slice_name, accelerator,
                                                                    version):
  [command] = dry("create", *WHERE, f"--slice={slice_name}", "--spot")
  assert command == ["gcloud", "compute", "tpus", "tpu-vm", "create", "bert",
                     "--zone=us-central2-b", f"--accelerator-type={accelerator}",
                     f"--version={version}", "--spot"]


def test_the_scripts_hosts_per_slice_are_the_target_tables():
  """Every slice --target knows: the chips and hosts the script says it has."""
  for name, tpu in targets.TPU_SLICES.items():
    chips = math.prod(int(n) for n in tpu.topology_name.split(":")[1].split("x"))
    hosts = max(1, chips // math.prod(tpu.chips_per_host_bounds))
    out = subprocess.run(["bash", SCRIPT, "create", *WHERE, f"--slice={name}", "--dry_run"],
                         capture_output=True, text=True, check=True).stdout
    said = re.match(r"# \S+: (\d+) chips on (\d+) hosts?", out)
    assert said and (int(said[1]), int(said[2])) == (chips, hosts), (name, out)


def test_install_builds_a_wheel_and_installs_it_with_the_tpu_extra_on_every_worker():
  build, copy, install = dry("install", *WHERE, "--project=p1")
  assert build[:4] == ["python", "-m", "pip", "wheel"] and build[-1] == "."
  assert copy[4] == "scp" and copy[-1] == "--worker=all" and "--project=p1" in copy
  assert copy[5].endswith(".whl") and copy[6] == "bert:"
  assert install[4] == "ssh" and "--worker=all" in install
  worker = shlex.split(install[-1].removeprefix("--command="))
  assert worker[:4] == ["python3", "-m", "pip", "install"]
  assert worker[-1] == os.path.basename(copy[5]) + "[tpu]"


def test_run_is_the_same_command_on_every_worker_joined_by_distributed_auto():
  workdir = "--workdir=gs://bucket/runs/it's base"  # a quote survives both shells
  [command] = dry("run", *WHERE, "--slice=v4-16", "--", "bert-jax-train",
                  "--config=base:runlocal=True", workdir)
  assert command[4:6] == ["ssh", "bert"] and "--worker=all" in command
  assert shlex.split(command[-1].removeprefix("--command=")) == [
      "bert-jax-train", "--config=base:runlocal=True", workdir, "--distributed=auto"]
  [command] = dry("run", *WHERE, "--slice=v4-8", "--", "bert-jax-train",
                  "--workdir=runs/base", "--distributed=off")
  assert command[-1].endswith("--distributed=off")  # one host: a local workdir is allowed


def test_refusals_are_one_line_and_name_what_is_wrong():
  assert "a v4-16 slice has 2 hosts" in refusal("run", *WHERE, "--slice=v4-16", "--",
                                                "bert-jax-train", "--workdir=runs/base")
  assert "--slice='v7-8'" in refusal("create", *WHERE, "--slice=v7-8")
  assert "--name= is required" in refusal("create", "--zone=z", "--slice=v4-8")
  assert "unknown option '--slices=v4-8'" in refusal("create", *WHERE, "--slices=v4-8")
  assert "a step" in refusal("launch", *WHERE)
  assert "needs the command after --" in refusal("run", *WHERE, "--slice=v4-8")
