"""Weights in and out: TF checkpoints, HF folders, our saved models; and bad input."""
import glob
import json
import os
import re
import shutil

import numpy as np
import pytest

from bert_jax.weights import hf, hf_files, mapping
from bert_jax.weights import load_params, load_pretrained
from tests.helpers.checkpoints import CONFIG, random_state, write_tf

def _write_hf(folder, state, config=CONFIG, vocab_entries=None):
  os.makedirs(folder, exist_ok=True)
  from safetensors.numpy import save_file
  save_file(state, os.path.join(folder, "model.safetensors"))
  with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump(config.to_hf_dict(), f)
  if vocab_entries is not None:
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
      f.write("\n".join(f"tok{i}" for i in range(vocab_entries)) + "\n")
  return str(folder)


def test_tf_checkpoint_matches_hf_import(tmp_path):
  pytest.importorskip("tensorflow")
  state = random_state()
  write_tf(str(tmp_path), state)
  config, params, with_heads = load_params(str(tmp_path))
  assert with_heads and config == CONFIG
  expected, _ = hf.state_to_params(state, CONFIG, "ref")
  flat, ref = mapping.flatten(params), mapping.flatten(expected)
  assert flat.keys() == ref.keys()
  for k in ref:
    np.testing.assert_array_equal(flat[k], ref[k], err_msg=k)


def test_hf_folder_without_prefix_and_old_layernorm_names(tmp_path):
  state = random_state(heads=False)
  renamed = {}
  for k, v in state.items():
    k = k[len("bert."):].replace("LayerNorm.weight", "LayerNorm.gamma")
    renamed[k.replace("LayerNorm.bias", "LayerNorm.beta")] = v
  renamed["embeddings.position_ids"] = np.arange(16)[None]
  folder = _write_hf(tmp_path / "m", renamed)
  model, variables = load_pretrained(folder)
  assert type(model).__name__ == "BertModel"
  ids = np.array([[1, 2, 3]], np.int32)
  assert model.apply(variables, ids).sequence_output.shape == (1, 3, 24)


def test_native_save_restore_and_scan_layout(tmp_path):
  import jax
  from bert_jax.weights import checkpoint
  folder = _write_hf(tmp_path / "hf", random_state())
  config, params, _ = load_params(folder)
  checkpoint.save_model(str(tmp_path / "native"), config, params)
  model, variables = load_pretrained(str(tmp_path / "native"))
  scanned_model, scanned_vars = load_pretrained(str(tmp_path / "native"), scan_layers=True)
  assert "layers" in scanned_vars["params"]["bert"]["encoder"]
  ids = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], np.int32)
  mask = (ids > 0).astype(np.int32)
  a = model.apply(variables, ids, None, mask)
  b = scanned_model.apply(scanned_vars, ids, None, mask)
  np.testing.assert_allclose(a.mlm_logits, b.mlm_logits, atol=1e-5)
  ref = load_params(folder)[1]
  for k, v in mapping.flatten(ref).items():
    np.testing.assert_array_equal(np.asarray(mapping.flatten(jax.device_get(
        variables["params"]))[k]), v, err_msg=k)


# --- bad input: one clear error each -------------------------------------------------

def test_missing_path_and_missing_weights(tmp_path):
  with pytest.raises(FileNotFoundError, match="no such file"):
    load_pretrained(str(tmp_path / "nope"))
  os.makedirs(tmp_path / "empty")
  (tmp_path / "empty" / "config.json").write_text(json.dumps(CONFIG.to_hf_dict()))
  with pytest.raises(FileNotFoundError, match="no model.safetensors"):
    load_pretrained(str(tmp_path / "empty"))
  (tmp_path / "empty" / "pytorch_model.bin").write_bytes(b"\x80")
  with pytest.raises(ValueError, match="pickle"):
    load_pretrained(str(tmp_path / "empty"))


def test_damaged_safetensors_is_one_line_naming_the_file(tmp_path):
  """A model.safetensors cut to a third: a ValueError naming the file, from the loader and
  from the convert command (one line, no traceback)."""
  import subprocess
  import sys
  folder = _write_hf(tmp_path / "hf", random_state())
  weights_file = os.path.join(folder, "model.safetensors")
  with open(weights_file, "rb") as f:
    data = f.read()
  with open(weights_file, "wb") as f:
    f.write(data[:len(data) // 3])
  with pytest.raises(ValueError, match=re.escape(weights_file) + ": not a readable safetensors"):
    load_pretrained(folder)
  result = subprocess.run([sys.executable, "-m", "bert_jax.commands.convert", f"--input={folder}",
                           f"--output={tmp_path / 'out'}"], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(f"bert_jax.commands.convert: error: {weights_file}: "
                                                 "not a readable safetensors"), result.stderr


def test_damaged_tf_checkpoint_is_one_line_naming_it(tmp_path):
  """The checkpoint's data file cut to a third: a ValueError naming the checkpoint."""
  pytest.importorskip("tensorflow")
  prefix = write_tf(str(tmp_path), random_state())
  data_file = max(glob.glob(prefix + ".data-*"), key=os.path.getsize)
  with open(data_file, "rb") as f:
    data = f.read()
  with open(data_file, "wb") as f:
    f.write(data[:len(data) // 3])
  with pytest.raises(ValueError, match=re.escape(prefix) + ": not a readable TF checkpoint"):
    load_params(str(tmp_path))


def test_wrong_shape_names_tensor_and_both_shapes(tmp_path):
  folder = _write_hf(tmp_path / "m", random_state(), config=CONFIG.replace(vocab_size=51))
  with pytest.raises(ValueError, match=r"word_embeddings.weight has shape \(50, 24\) but the "
                                       r"config expects \(51, 24\).*vocab size"):
    load_pretrained(folder)


def test_unknown_tensor(tmp_path):
  state = random_state()
  state["bert.encoder.layer.0.extra.weight"] = np.zeros(3, np.float32)
  with pytest.raises(ValueError, match="unknown tensor.*layer.0.extra.weight"):
    load_pretrained(_write_hf(tmp_path / "m", state))


def test_missing_tensor(tmp_path):
  state = random_state()
  del state["bert.encoder.layer.1.output.dense.bias"]
  with pytest.raises(ValueError, match="missing tensor bert.encoder.layer.1.output.dense.bias"):
    load_pretrained(_write_hf(tmp_path / "m", state))


def test_vocab_file_must_match_embedding(tmp_path):
  folder = _write_hf(tmp_path / "m", random_state(), vocab_entries=49)
  with pytest.raises(ValueError, match="vocab.txt: 49 entries but the model's vocab_size is 50"):
    load_pretrained(folder)


def test_untied_decoder_refused(tmp_path):
  state = random_state()
  state["cls.predictions.decoder.weight"] = np.ones((50, 24), np.float32)
  with pytest.raises(ValueError, match="not tied"):
    load_pretrained(_write_hf(tmp_path / "m", state))


def test_heads_none_drops_pretraining_heads(tmp_path):
  model, variables = load_pretrained(_write_hf(tmp_path / "m", random_state()), heads="none")
  assert type(model).__name__ == "BertModel" and "pooler" in variables["params"]


def test_convert_cli_round_trip(tmp_path, capsys):
  from bert_jax.commands.convert import convert
  folder = _write_hf(tmp_path / "hf", random_state(), vocab_entries=50)
  convert(folder, str(tmp_path / "native"), to="native")
  assert os.path.exists(tmp_path / "native" / "vocab.txt")
  convert(str(tmp_path / "native"), str(tmp_path / "back"), to="hf")
  # The 50-entry vocab.txt has no [CLS] etc.: copied as it is, and the output says so.
  assert "lacks the special token(s)" in capsys.readouterr().out
  assert not os.path.exists(tmp_path / "back" / "tokenizer.json")
  original = hf_files.read_state(folder)
  back = hf_files.read_state(str(tmp_path / "back"))
  assert original.keys() == back.keys()
  for k in original:
    np.testing.assert_array_equal(original[k], back[k], err_msg=k)
  shutil.rmtree(tmp_path / "native")
