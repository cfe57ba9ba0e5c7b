"""A pretrained source (config.init_from, a command's --model / --input) is resolved once:
its format detected (a TF checkpoint located), its config read, its family looked up and
its headed model worked out once per run or load, its weights read once (a cached frozen
encoder and the trainer's start take the same read), its weights files checked whole
before anything is trained; a damaged weights file is one line naming it, from the loader
and from the commands that read weights (a damaged TF checkpoint: tests/test_convert.py)."""
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from flax import linen as nn

from bert_jax import weights
from bert_jax.models.bert import BertModel
from bert_jax.models.config import config_for_size
from bert_jax.models.headed import BertForPreTraining
from bert_jax.weights import checkpoint, hf, hf_families, hf_files, loader, mapping, tf_checkpoint
from tests.helpers.checkpoints import write_tf

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


@pytest.fixture(scope="module")
def tf_folder(tmp_path_factory):
  """A tiny random BERT with its pretraining heads, as a Google TF checkpoint's folder."""
  pytest.importorskip("tensorflow")
  config = config_for_size("tiny", vocab_size=64, max_position_embeddings=32)
  rng = np.random.default_rng(0)
  shapes = hf.expected_shapes(config, with_heads=True)
  state = {hf_name: layout.to_hf(rng.normal(size=shapes[ours]).astype(np.float32), config)
           for ours, hf_name, layout in mapping.all_rows(config, "bert/", True)}
  folder = str(tmp_path_factory.mktemp("source") / "tf")
  os.makedirs(folder)
  write_tf(folder, state, config)
  return folder


def _counting(monkeypatch, module, name):
  """Replaces module.name with a wrapper that counts its calls; returns the count list."""
  calls, original = [], getattr(module, name)

  def counted(*args, **kwargs):
    calls.append(args[:1])
    return original(*args, **kwargs)

  monkeypatch.setattr(module, name, counted)
  return calls


CACHED = {"freeze_encoder": True, "feature_layers": "-1", "cache_features": True}


@pytest.mark.parametrize("fields", [{}, CACHED], ids=["fine_tuned", "cached_frozen_encoder"])
def test_a_run_from_init_from_detects_its_format_and_reads_its_config_once(
    fields, hf_folder, tmp_path, monkeypatch, capsys):
  """GLUE SST-2 runlocal, 1 step from an HF folder: the format detected once, config.json
  read once (the model config, the task class it names and its labels all come from that
  read), and the weights read once, also where a cached frozen encoder (config.
  cache_features, before the trainer's start) reads them first."""
  from bert_jax.run import trainer
  from configs import glue
  detected = _counting(monkeypatch, loader, "_detect")  # where resolve detects the format
  config_reads = _counting(monkeypatch, hf_files, "read_json")
  weight_reads = _counting(monkeypatch, hf_files, "read_state")
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from = hf_folder
  run.num_train_steps = 1
  run.eval_every_steps = 0
  run.data.pack_each_batch = False
  run.update(fields)
  trainer.train_and_evaluate(run, str(tmp_path / "run"))
  assert len(detected) == 1 and len(config_reads) == 1 and len(weight_reads) == 1, (
      detected, config_reads, weight_reads)
  assert ("Cached layers" in capsys.readouterr().out) == bool(fields)


READS = {  # format -> what a load of it looks up or reads, each exactly once
    "hf": ((loader, "_detect"), (hf_files, "read_json"), (hf_families, "hf_family"),
           (hf, "headed_spec_of"), (hf_files, "read_state")),
    "tf": ((loader, "_detect"), (tf_checkpoint, "locate"), (tf_checkpoint, "read_config"),
           (hf_families, "hf_family"), (tf_checkpoint, "read_state")),
}


@pytest.mark.parametrize("fmt", sorted(READS))
def test_a_load_and_a_conversion_detect_locate_and_read_each_file_once(fmt, request, tmp_path,
                                                                       monkeypatch):
  """load_pretrained and the convert command, of an HF folder and of a TF checkpoint: the
  format detected once, a TF checkpoint located once, the config file read and the family
  entry looked up once (model_type), an HF folder's task class worked out once, and the
  weights read once; each counted where the loader calls it."""
  from bert_jax.commands.convert import convert
  path = request.getfixturevalue(f"{fmt}_folder")
  for run in (lambda: weights.load_pretrained(path),
              lambda: convert(path, str(tmp_path / "native"))):
    with monkeypatch.context() as patch:
      counts = {f"{module.__name__}.{name}": _counting(patch, module, name)
                for module, name in READS[fmt]}
      run()
    assert {name: len(calls) for name, calls in counts.items()} == dict.fromkeys(counts, 1)
  model, variables = weights.load_pretrained(str(tmp_path / "native"))
  assert type(model).__name__ == "BertForPreTraining" and "nsp_head" in variables["params"]


@pytest.mark.parametrize("pooler", [True, False], ids=["with_pooler", "without_pooler"])
def test_a_saved_encoder_with_the_encoder_spec_loads_as_it_was_saved(pooler, tmp_path, capsys):
  """save_model of bare BertModel params with spec={"headed_model": "encoder"}: loaded back
  as that encoder, every tensor as saved, nothing newly initialised."""
  config = config_for_size("tiny", vocab_size=64, max_position_embeddings=32)
  ids = np.array([[5, 6, 7, 8]], np.int32)
  encoder = BertModel(config, add_pooling_layer=pooler)
  params = jax.device_get(nn.unbox(encoder.init(jax.random.key(0), ids)["params"]))
  folder = str(tmp_path / "encoder")
  checkpoint.save_model(folder, config, params, spec={"headed_model": "encoder"})
  capsys.readouterr()
  model, variables = weights.load_pretrained(folder)
  assert "newly initialised" not in capsys.readouterr().out
  assert type(model).__name__ == "BertModel"
  saved, loaded = mapping.flatten(params), mapping.flatten(jax.device_get(variables["params"]))
  assert loaded.keys() == saved.keys()
  for name, value in saved.items():
    np.testing.assert_array_equal(loaded[name], value, err_msg=name)
  np.testing.assert_array_equal(model.apply(variables, ids).sequence_output,
                                encoder.apply({"params": params}, ids).sequence_output)


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
  assert source.config == config and source.spec["headed_model"] == "pretraining"
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
