"""Checkpoints written by the package before its reorganisation (commit 685a8e2: the run
machinery at the package root, the modules not yet split) load, convert, start runs and
resume with the code of today: no parameter tree was renamed.

tests/data/old_layout/ holds what that commit's code wrote (its make_fixture.py says how):
a saved model (`checkpoint.save_model`), a 3-step pretraining workdir of its trainer, and
both models' outputs on fixed inputs. Every test works on a copy in tmp_path, so the
committed files are never written.
"""
import json
import os
import shutil
import subprocess
import sys

import jax
import ml_collections
import numpy as np
import pytest

from bert_jax import weights
from bert_jax.models.headed import BertForPreTraining
from bert_jax.run import trainer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(REPO, "tests", "data", "old_layout")
OUTPUTS = ("sequence_output", "pooled_output", "mlm_logits", "nsp_logits")


@pytest.fixture
def old_layout(tmp_path):
  """A copy of the fixture folder (without its generator), for one test to read or write."""
  copy = tmp_path / "old_layout"
  shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
  return str(copy)


@pytest.fixture(scope="module")
def expected():
  with np.load(os.path.join(FIXTURE, "expected.npz")) as arrays:
    return dict(arrays)


def outputs(model, variables, expected: dict) -> dict:
  """The model's outputs on the recorded inputs, as make_fixture.py computed them."""
  out = model.apply(variables, expected["input_ids"], expected["token_type_ids"],
                    expected["attention_mask"], deterministic=True)
  return {"sequence_output": out.sequence_output, "pooled_output": out.pooled_output,
          "mlm_logits": out.mlm_logits, "nsp_logits": out.sentence_logits["nsp"]}


def params_of(path: str) -> dict:
  """Flat {"a/b/c": array} of a checkpoint's params (saved model or latest workdir step)."""
  _, params, _ = weights.load_params(path)
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return {"/".join(k.key for k in keys): np.asarray(v) for keys, v in flat}


def old_run_config(root: str, **changes) -> ml_collections.ConfigDict:
  """The old workdir's own run config (its config.json) on today's configs/tiny.py.

  Every field the old run recorded is set to its recorded value; fields added since keep
  their defaults. A recorded field today's schema lacks fails the test, naming it. The
  data paths are relative to the data root, here the fixture's copy `root`.
  """
  from configs import tiny
  config = tiny.get_config(f"corpus={os.path.join(root, 'corpus.txt')},runlocal=True")
  with open(os.path.join(root, "workdir", "config.json")) as f:
    recorded = json.load(f)
  missing = []

  def assign(node, values, where):
    for key, value in values.items():
      if key not in node:
        missing.append(where + key)
      elif isinstance(value, dict) and isinstance(node[key], ml_collections.ConfigDict):
        assign(node[key], value, f"{where}{key}.")
      else:
        node[key] = tuple(value) if isinstance(node[key], tuple) else value

  assign(config, recorded, "")
  assert not missing, f"fields of the old config today's schema lacks: {missing}"
  config.data.data_dir = root
  for key, value in changes.items():
    config[key] = value
  return config


def read_rows(workdir: str) -> list[dict]:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", ["saved_model", "workdir"])
def test_old_checkpoint_loads_with_its_heads_and_outputs(old_layout, expected, name):
  """load_pretrained gives BertForPreTraining (MLM + NSP heads) and the outputs the old
  code computed. The stored outputs come from another machine, and XLA's CPU code differs
  between processors (vector widths, fused multiply-adds): on an AMD EPYC 89 of 512
  sequence_output elements differ from an Intel Xeon's by up to 1.2e-7. So the outputs
  are compared within 1e-5 (a renamed or mis-loaded tensor moves them by far more), and
  two loads in this one run must agree bit for bit."""
  path = os.path.join(old_layout, name)
  model, variables = weights.load_pretrained(path)
  assert type(model) is BertForPreTraining and model.sentence_heads == ("nsp",)
  got = outputs(model, variables, expected)
  for key, value in got.items():
    np.testing.assert_allclose(np.asarray(value), expected[f"{name}/{key}"], rtol=1e-5,
                               atol=1e-5, err_msg=key)
  again = outputs(*weights.load_pretrained(path), expected)
  for key, value in got.items():
    np.testing.assert_array_equal(np.asarray(again[key]), np.asarray(value), err_msg=key)


def test_old_workdir_converts_to_hf(old_layout, tmp_path):
  """`python -m bert_jax.commands.convert --to=hf` of the old workdir: an HF folder with the
  tokenizer, whose weights read back (HF names and layouts both ways) as the workdir's."""
  source, output = os.path.join(old_layout, "workdir"), str(tmp_path / "hf")
  result = subprocess.run([sys.executable, "-m", "bert_jax.commands.convert", f"--input={source}",
                           f"--output={output}", "--to=hf"], capture_output=True, text=True,
                          cwd=REPO)
  assert result.returncode == 0, result.stderr
  assert {"config.json", "model.safetensors", "vocab.txt", "tokenizer.json"} <= set(
      os.listdir(output))
  with open(os.path.join(output, "config.json")) as f:
    assert json.load(f)["architectures"] == ["BertForPreTraining"]
  ours, theirs = params_of(source), params_of(output)
  assert ours.keys() == theirs.keys()
  for key in ours:
    np.testing.assert_array_equal(theirs[key], ours[key], err_msg=key)


def test_init_from_old_workdir_starts_from_its_weights(old_layout, tmp_path):
  """init_from=<old workdir>: step 1 (learning rate 0 in warmup) leaves its params as they
  were, so its logged param_norm is the old params'; step 2 trains them."""
  source = os.path.join(old_layout, "workdir")
  config = old_run_config(old_layout, num_train_steps=2, init_from=source)
  workdir = str(tmp_path / "from_old")
  trainer.train_and_evaluate(config, workdir)
  rows = {r["step"]: r for r in read_rows(workdir) if "loss" in r}
  old = params_of(source)
  norm = np.sqrt(sum(np.sum(np.square(v)) for v in old.values()))
  assert rows[1]["learning_rate"] == 0.0 and rows[2]["learning_rate"] > 0.0
  assert abs(rows[1]["param_norm"] - norm) <= 1e-6 * norm, (rows[1]["param_norm"], norm)
  assert np.isfinite(rows[2]["loss"])
  new = params_of(workdir)
  assert new.keys() == old.keys()
  assert all(np.any(new[k] != old[k]) for k in ("bert/pooler/dense/kernel",
                                                "mlm_head/output_bias"))


def test_old_workdir_resumes_at_its_step(old_layout, capsys):
  """Today's trainer resumes the old run (its config, one step more): from step 3, with
  its data position, keeping the old metrics rows and adding step 4."""
  workdir = os.path.join(old_layout, "workdir")
  before = read_rows(workdir)
  config = old_run_config(old_layout, num_train_steps=4)
  final = trainer.train_and_evaluate(config, workdir)
  assert f"Resumed from {os.path.join(workdir, 'checkpoints')} at step 3" in capsys.readouterr().out
  rows = read_rows(workdir)
  assert rows[:len(before)] == before
  assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]
  assert np.isfinite(final["loss"])
  with open(os.path.join(workdir, "eval_results.json")) as f:
    assert json.load(f)["step"] == 4
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["4"]
