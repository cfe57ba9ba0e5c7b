"""The family's pretraining configs run end to end from the command line, each with the
vocabulary kind its family uses (learned here from the test corpus), and the pretrained
workdir fine-tunes on SST-2 through the same CLI with the tokenizer it saved."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*args):
  out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


@pytest.fixture(scope="module")
def sentencepiece_vocab(corpus, tmp_path_factory):
  folder = tmp_path_factory.mktemp("spm") / "spm-1k"
  _cli("-m", "bert_jax.text.learn_vocab", "--kind=sentencepiece", f"--input={corpus}",
       "--vocab_size=1000", f"--output={folder}")
  return str(folder)


def test_albert_config_pretrains_and_its_workdir_fine_tunes(corpus, sentencepiece_vocab,
                                                            data_dir, tmp_path):
  workdir = str(tmp_path / "albert")
  _cli("-m", "bert_jax.train",
       f"--config=configs/albert.py:corpus={corpus},vocab={sentencepiece_vocab},"
       "vocab_size=1000,runlocal=True", f"--workdir={workdir}",
       "--config.num_train_steps=6", "--config.eval_every_steps=0", "--config.data.cache_dir=")
  with open(os.path.join(workdir, "eval_results.json")) as f:
    results = json.load(f)
  assert {"eval_mlm_accuracy", "eval_sop_accuracy"} <= set(results)
  with open(os.path.join(workdir, "model_config.json")) as f:
    model = json.load(f)
  assert (model["family"], model["layer_sharing"], model["embedding_size"]) == ("albert", "all",
                                                                                64)
  assert os.path.isfile(os.path.join(workdir, "spiece.model"))  # the tokenizer travels along

  finetuned = str(tmp_path / "albert_sst2")
  _cli("-m", "bert_jax.train", "--config=configs/glue.py:task=sst2,runlocal=True",
       f"--config.init_from={workdir}", f"--config.data.data_dir={data_dir}",
       f"--workdir={finetuned}")
  with open(os.path.join(finetuned, "eval_results.json")) as f:
    assert 0.0 <= json.load(f)["eval_accuracy"] <= 1.0
