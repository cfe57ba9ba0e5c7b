"""A pretrained source (config.init_from, a command's --model / --input) is resolved once:
its format detected and its config read once per run, its weights files checked whole
before anything is trained; a damaged weights file is one line naming it, from the loader
and from the commands that read weights (a damaged TF checkpoint: tests/test_convert.py)."""
import json
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from flax import linen as nn

from bert_jax import weights
from bert_jax.weights import checkpoint, loader
from bert_jax.convert import hf
from bert_jax.models.config import config_for_size
from bert_jax.models.headed import BertForPreTraining

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory, vocab_path):
  """A tiny random BERT with its pretraining heads, as an HF folder with BERT's vocab."""
  config = config_for_size("tiny", vocab_size=30522, max_position_embeddings=64)
  params = nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  folder = str(tmp_path_factory.mktemp("source") / "hf")
  hf.save(folder, config, jax.device_get(params), vocab_path=vocab_path)
  return folder


def _counting(monkeypatch, module, name):
  """Replaces module.name with a wrapper that counts its calls; returns the count list."""
  calls, original = [], getattr(module, name)

  def counted(*args, **kwargs):
    calls.append(args[:1])
    return original(*args, **kwargs)

  monkeypatch.setattr(module, name, counted)
  return calls


def test_a_run_from_init_from_detects_its_format_and_reads_its_config_once(
    hf_folder, tmp_path, monkeypatch):
  """GLUE SST-2 runlocal, 1 step from an HF folder: detect_format once, config.json read
  once (the model config, the task class it names and its labels all come from that read),
  and the weights read once."""
  from bert_jax.run import trainer
  from configs import glue
  detected = _counting(monkeypatch, loader, "detect_format")  # where resolve calls it
  config_reads = _counting(monkeypatch, hf, "read_json")
  weight_reads = _counting(monkeypatch, hf, "read_state")
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from = hf_folder
  run.num_train_steps = 1
  run.eval_every_steps = 0
  trainer.train_and_evaluate(run, str(tmp_path / "run"))
  assert len(detected) == 1 and len(config_reads) == 1 and len(weight_reads) == 1, (
      detected, config_reads, weight_reads)


def test_resolve_reads_a_native_workdirs_record_once(tmp_path, monkeypatch):
  """A saved model: model_config.json read once gives the config, the headed model and the
  labels; loading its weights does not read it again."""
  config = config_for_size("tiny", vocab_size=64, max_position_embeddings=32)
  params = nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  folder = str(tmp_path / "saved")
  checkpoint.save_model(folder, config, jax.device_get(params),
                        spec={"headed_model": "pretraining", "sentence_heads": ["nsp"]})
  opened = []
  real_open = open

  def counting_open(path, *args, **kwargs):
    if str(path).endswith(checkpoint.MODEL_CONFIG):
      opened.append(path)
    return real_open(path, *args, **kwargs)

  monkeypatch.setattr("builtins.open", counting_open)
  source = weights.resolve(folder)
  model, variables = weights.load_pretrained(source)
  assert len(opened) == 1, opened
  assert source.config == config and source.spec()["headed_model"] == "pretraining"
  assert type(model).__name__ == "BertForPreTraining" and "nsp_head" in variables["params"]


def _cut(path: str, keep: float = 1 / 3) -> None:
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:int(len(data) * keep)])


def _biggest_file(folder: str) -> str:
  files = [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names]
  return max(files, key=os.path.getsize)


def test_a_cut_short_safetensors_is_refused_when_resolved(hf_folder, tmp_path):
  """Before any weights are read (and before a run compiles anything): the header's sizes
  against the file's."""
  import shutil
  folder = str(tmp_path / "cut")
  shutil.copytree(hf_folder, folder)
  weights_file = os.path.join(folder, "model.safetensors")
  _cut(weights_file, keep=0.9)
  with pytest.raises(ValueError, match=re.escape(weights_file) + r": not a readable "
                     r"safetensors file \(\d+ bytes, its header lists \d+\)"):
    weights.resolve(folder)
  assert weights.load_config(folder).hidden_size > 0  # the config alone still reads


def test_a_damaged_native_checkpoint_is_one_line_naming_its_folder(tmp_path):
  config = config_for_size("tiny", vocab_size=64, max_position_embeddings=32)
  params = nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  folder = str(tmp_path / "saved")
  checkpoint.save_model(folder, config, jax.device_get(params))
  _cut(_biggest_file(os.path.join(folder, "params")))
  with pytest.raises(ValueError, match=re.escape(os.path.join(folder, "params")) +
                     ": not a readable checkpoint"):
    weights.load_pretrained(folder)


@pytest.mark.parametrize("command", ["bert_jax.commands.embed", "bert_jax.commands.fill_mask"])
def test_commands_that_read_weights_say_one_line_for_a_damaged_file(command, hf_folder,
                                                                     tmp_path):
  import shutil
  folder = str(tmp_path / "cut")
  shutil.copytree(hf_folder, folder)
  weights_file = os.path.join(folder, "model.safetensors")
  _cut(weights_file)
  sentences = tmp_path / "sentences.txt"
  sentences.write_text("a short sentence .\n")
  args = {"bert_jax.commands.embed": [f"--input={sentences}", f"--output={tmp_path / 'out.npy'}"],
          "bert_jax.commands.fill_mask": ["a [MASK] sentence ."]}[command]
  result = subprocess.run([sys.executable, "-m", command, f"--model={folder}", *args],
                          capture_output=True, text=True, cwd=ROOT)
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr
  assert lines[0].startswith(f"{command}: error: {weights_file}: not a readable safetensors")
