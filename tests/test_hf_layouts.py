"""Every layout HF writes for the family loads and fine-tunes: a class saved without the
pooler or the NSP / SOP head (BertForMaskedLM, AlbertForMaskedLM, ErnieForMaskedLM, an
encoder with add_pooling_layer=False, a tagger or a span head used for another task). What
the checkpoint lacks is started by the model's own init and named in one line; the tensors
it holds give HF's outputs (1e-5, fp32, a padded batch)."""
import json
import os
import re
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.models.config import BertConfig  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402
from tests.helpers.hf_reference import hf_config  # noqa: E402

TOL = 1e-5
_SHAPE = dict(hidden_size=36, num_hidden_layers=2, num_attention_heads=3,
              intermediate_size=52, max_position_embeddings=32)
FAMILY_FIELDS = {
    "bert": {}, "ernie": {},
    "albert": {"embedding_size": 20, "layer_sharing": "all"},
    "roberta": {"type_vocab_size": 1, "layer_norm_eps": 1e-5, "pad_token_id": 1,
                "max_position_embeddings": 40},
    "electra": {"embedding_size": 20},
    "distilbert": {"type_vocab_size": 0},
}
# (family, HF class, its constructor's fields, what our load starts fresh)
CASES = [
    ("bert", "BertForMaskedLM", {}, ["bert/pooler"]),
    ("albert", "AlbertForMaskedLM", {}, ["bert/pooler"]),
    ("ernie", "ErnieForMaskedLM", {}, ["bert/pooler"]),
    ("roberta", "RobertaForMaskedLM", {}, []),
    ("electra", "ElectraForMaskedLM", {}, []),
    ("distilbert", "DistilBertForMaskedLM", {}, []),
    ("bert", "BertModel", {"add_pooling_layer": False}, []),
    ("albert", "AlbertModel", {"add_pooling_layer": False}, []),
    ("bert", "BertForTokenClassification", {}, []),
    ("bert", "BertForQuestionAnswering", {}, []),
]


def _config(family: str, vocab_size: int = 83) -> BertConfig:
  return BertConfig(**{**_SHAPE, "family": family, "vocab_size": vocab_size,
                       **FAMILY_FIELDS[family]})


def _save_random(config, cls_name, folder, seed=0, **fields):
  """A random HF model of `cls_name` (non-zero biases and norms, so a mapping slip shows),
  written by its save_pretrained; returns the model."""
  torch.manual_seed(seed)
  model = getattr(transformers, cls_name)(hf_config(config), **fields).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name or "norm" in name:
        p.add_(torch.randn_like(p) * 0.1)
  model.save_pretrained(folder)
  return model


def _batch(config, seed=0):
  rng = np.random.default_rng(seed)
  lengths = np.array([9, 5, 2])
  mask = (np.arange(9) < lengths[:, None]).astype(np.int32)
  ids = np.where(mask == 1, rng.integers(config.pad_token_id + 1, config.vocab_size, (3, 9)),
                 config.pad_token_id).astype(np.int32)
  types = (rng.integers(0, 2, (3, 9)) * mask).astype(np.int32)
  return ids, types if config.type_vocab_size > 1 else np.zeros_like(types), mask


@pytest.mark.parametrize("family, cls_name, fields, fresh", CASES,
                         ids=[f"{c[1]}{'-nopool' if c[2] else ''}" for c in CASES])
def test_an_hf_layout_loads_with_hfs_outputs_and_names_what_it_lacks(
    family, cls_name, fields, fresh, tmp_path, capsys):
  config = _config(family)
  folder = str(tmp_path / cls_name)
  reference = _save_random(config, cls_name, folder, **fields)
  ids, types, mask = _batch(config)
  kwargs = {"input_ids": torch.tensor(ids, dtype=torch.long),
            "attention_mask": torch.tensor(mask, dtype=torch.long)}
  if config.type_vocab_size:
    kwargs["token_type_ids"] = torch.tensor(types, dtype=torch.long)
  with torch.no_grad():
    theirs = reference(**kwargs, output_hidden_states=True)

  model, variables = load_pretrained(folder)
  printed = capsys.readouterr().out
  if fresh:
    assert f"{folder}: newly initialised {fresh} (not in the checkpoint" in printed, printed
    assert set(fresh) <= {f"bert/{k}" for k in variables["params"]["bert"]}
  else:
    assert "newly initialised" not in printed, printed
  ours = model.apply(variables, ids, types, mask, output_hidden_states=True)
  real = mask[..., None]
  diff = np.abs(np.asarray(ours.hidden_states[-1]) - theirs.hidden_states[-1].numpy()) * real
  assert diff.max() < TOL, float(diff.max())
  if cls_name.endswith("MaskedLM"):
    diff = np.abs(np.asarray(ours.mlm_logits) - theirs.logits.numpy()) * real
    assert diff.max() < TOL, float(diff.max())


def test_a_partly_missing_head_is_still_an_error(tmp_path):
  """A head with some of its tensors is damaged, not absent: the missing one is named."""
  from safetensors.numpy import load_file, save_file
  folder = str(tmp_path / "mlm")
  _save_random(_config("bert"), "BertForMaskedLM", folder)
  path = os.path.join(folder, "model.safetensors")
  state = load_file(path)
  del state["cls.predictions.transform.dense.bias"]
  save_file(state, path)
  with pytest.raises(ValueError, match=re.escape(
      f"{folder}: missing tensor cls.predictions.transform.dense.bias")):
    load_pretrained(folder)


def test_heads_pretraining_still_requires_the_heads(tmp_path):
  folder = str(tmp_path / "encoder")
  _save_random(_config("bert"), "BertModel", folder)
  with pytest.raises(ValueError, match="missing tensor cls.predictions"):
    load_pretrained(folder, heads="pretraining")


# (family, HF class the checkpoint is, its fields, the lines the run prints about it)
FINE_TUNE_CASES = [
    ("bert", "BertForMaskedLM", {},
     "dropped the checkpoint's ['mlm_head']; newly initialised ['classifier', 'bert/pooler']"),
    ("albert", "AlbertForMaskedLM", {},
     "dropped the checkpoint's ['mlm_head']; newly initialised ['classifier', 'bert/pooler']"),
    ("ernie", "ErnieForMaskedLM", {},
     "dropped the checkpoint's ['mlm_head']; newly initialised ['classifier', 'bert/pooler']"),
    ("bert", "BertForQuestionAnswering", {},
     "dropped the checkpoint's ['qa_outputs']; newly initialised ['classifier', 'bert/pooler']"),
]


@pytest.mark.slow
@pytest.mark.parametrize("family, cls_name, fields, note", FINE_TUNE_CASES,
                         ids=[c[1] for c in FINE_TUNE_CASES])
def test_an_hf_layout_fine_tunes_as_init_from(family, cls_name, fields, note, tmp_path,
                                              vocab_path, capsys):
  """GLUE SST-2 runlocal, 2 steps, from the folder HF's save_pretrained wrote (with BERT's
  vocab.txt beside it): the run says what it dropped and what it started fresh."""
  from bert_jax.run import trainer
  from configs import glue
  config = _config(family, vocab_size=30522).replace(pad_token_id=0)
  folder = str(tmp_path / cls_name)
  _save_random(config, cls_name, folder, **fields)
  shutil.copyfile(vocab_path, os.path.join(folder, "vocab.txt"))
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from = folder
  run.num_train_steps = 2
  run.log_every_steps = 1
  run.eval_every_steps = 0
  workdir = str(tmp_path / "sst2")
  trainer.train_and_evaluate(run, workdir)
  assert f"Initialised from {folder} ({note})" in capsys.readouterr().out
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
  assert len(losses) == 2 and all(np.isfinite(losses)), losses


# --- pytorch_model.bin -----------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bin_folder(tmp_path):
  """config.json + pytorch_model.bin, as save_pretrained(safe_serialization=False) wrote it
  before transformers 5 (whose save_pretrained writes safetensors whatever that flag says):
  torch.save of the state dict, tied decoder and all. Returns (folder, the HF model)."""
  config = _config("bert")
  folder = str(tmp_path / "bin")
  model = _save_random(config, "BertForMaskedLM", folder)
  os.remove(os.path.join(folder, "model.safetensors"))
  torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
  return folder, model


def _convert_command(*args, block_torch=False):
  import subprocess
  import sys
  code = ("import runpy, sys; " + ("sys.modules['torch'] = None; " if block_torch else "")
          + f"sys.argv = ['convert', *{list(args)!r}]; "
          "runpy.run_module('bert_jax.commands.convert', run_name='__main__', alter_sys=True)")
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_a_bin_folder_is_refused_naming_the_command_that_converts_it(tmp_path):
  folder, _ = _bin_folder(tmp_path)
  with pytest.raises(ValueError, match=re.escape(
      f"{folder}: only pytorch_model.bin found; pickle files are not loaded. Convert it to "
      f"model.safetensors first: python -m bert_jax.commands.convert --input={folder} "
      "--output=NEW_FOLDER")):
    load_pretrained(folder)


def test_convert_turns_a_bin_folder_into_safetensors_with_hfs_outputs(tmp_path):
  folder, reference = _bin_folder(tmp_path)
  shutil.copyfile(os.path.join(folder, "config.json"), os.path.join(folder, "extra.json"))
  out = str(tmp_path / "converted")
  result = _convert_command(f"--input={folder}", f"--output={out}")
  assert result.returncode == 0, result.stderr
  assert f"Wrote {out}/model.safetensors (" in result.stdout, result.stdout
  assert sorted(os.listdir(out)) == ["config.json", "extra.json", "model.safetensors"]
  config = _config("bert")
  ids, types, mask = _batch(config)
  with torch.no_grad():
    theirs = reference(input_ids=torch.tensor(ids, dtype=torch.long),
                       token_type_ids=torch.tensor(types, dtype=torch.long),
                       attention_mask=torch.tensor(mask, dtype=torch.long)).logits.numpy()
  model, variables = load_pretrained(out)
  ours = np.asarray(model.apply(variables, ids, types, mask).mlm_logits)
  assert (np.abs(ours - theirs) * mask[..., None]).max() < TOL


def test_convert_of_a_bin_folder_without_torch_says_how_to_install_it(tmp_path):
  folder, _ = _bin_folder(tmp_path)
  result = _convert_command(f"--input={folder}", f"--output={tmp_path / 'out'}",
                            block_torch=True)
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr
  assert lines[0].endswith(f"{folder}: reading pytorch_model.bin needs torch, which is not "
                           "installed here: pip install torch --index-url "
                           "https://download.pytorch.org/whl/cpu"), lines
  assert not os.path.exists(tmp_path / "out")


class _Runs:
  """A pickle that would run a command when unpickled without weights_only."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (os.system, (f"touch {self.marker}",))


def test_a_bin_that_is_not_only_tensors_is_refused_and_nothing_in_it_runs(tmp_path):
  from bert_jax.weights import hf_files
  folder, _ = _bin_folder(tmp_path)
  marker = tmp_path / "ran"
  torch.save({"w": _Runs(str(marker))}, os.path.join(folder, "pytorch_model.bin"))
  with pytest.raises(ValueError, match=re.escape(os.path.join(folder, "pytorch_model.bin"))
                     + r": not readable as PyTorch weights with weights_only=True \("):
    hf_files.bin_to_safetensors(folder, str(tmp_path / "out"))
  assert not marker.exists()


@pytest.mark.parametrize("family, cls_name", [("bert", "BertForMaskedLM"),
                                              ("albert", "AlbertForMaskedLM"),
                                              ("ernie", "ErnieForMaskedLM")])
def test_a_masked_lm_folder_exports_back_to_its_hf_class(family, cls_name, tmp_path):
  """HF folder -> ours -> HF: the masked LM class again, every tensor as HF saved it."""
  from bert_jax.commands.convert import convert
  folder, ours, back = (str(tmp_path / name) for name in ("hf", "ours", "back"))
  reference = _save_random(_config(family), cls_name, folder)
  convert(folder, ours)
  convert(ours, back, to="hf")
  with open(os.path.join(back, "config.json")) as f:
    assert json.load(f)["architectures"] == [cls_name]
  model, info = getattr(transformers, cls_name).from_pretrained(back, output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  theirs, again = reference.state_dict(), model.state_dict()
  assert sorted(theirs) == sorted(again)
  for name, tensor in theirs.items():
    assert torch.equal(tensor, again[name]), name
