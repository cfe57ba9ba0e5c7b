"""Pins the per-step losses of two runlocal runs, recorded before the layout change.

`tests/data/pinned_losses.json` was first written by this file's `record()` at commit bdb060c
(the last commit before bert_jax was split into text/ pretrain/ finetune/ models/): a
refactor that changes what the trainer computes fails here. Re-record only for an intended
change of behaviour, and say so in the commit. Re-recorded once, for the dropout masks
drawn from 16 bits (models/layers.py `dropout`); with jax.random.bernoulli's masks put
back, the new code gave the old pins to 1e-6.
"""
import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from flax import linen as nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINNED = os.path.join(REPO, "tests", "data", "pinned_losses.json")


def _prepare(out_dir):
  corpus = os.path.join(out_dir, "pretrain.txt")
  subprocess.run([sys.executable, "-m", "bert_jax.text.prepare",
                  "--source=wikitext-2/valid.txt", f"--output={corpus}"], check=True,
                 cwd=REPO, capture_output=True)
  return corpus


def _losses(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f]
  return {str(r["step"]): r["loss"] for r in rows if "loss" in r}


def _small_bert(folder, vocab_path):
  from bert_jax.weights import checkpoint
  from bert_jax.models.config import BertConfig
  from bert_jax.models.bert import BertModel
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
  params = nn.unbox(BertModel(config).init(jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  checkpoint.save_model(folder, config, jax.device_get(params), vocab_path=vocab_path)
  return folder


def run_both(tmp, vocab_path):
  from bert_jax.run import trainer
  from configs import glue, tiny
  config = tiny.get_config(f"corpus={_prepare(tmp)},runlocal=True")
  config.data.cache_dir = ""
  config.log_every_steps = 1
  trainer.train_and_evaluate(config, os.path.join(tmp, "tiny"))
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.data.pack_each_batch = False  # the padded path the pins were recorded on
  config.init_from = _small_bert(os.path.join(tmp, "small_bert"), vocab_path)
  config.log_every_steps = 1
  trainer.train_and_evaluate(config, os.path.join(tmp, "sst2"))
  return {"tiny_runlocal": _losses(os.path.join(tmp, "tiny")),
          "glue_sst2_runlocal": _losses(os.path.join(tmp, "sst2"))}


@pytest.mark.slow
def test_losses_equal_the_pinned_ones(tmp_path, vocab_path):
  with open(PINNED) as f:
    pinned = json.load(f)
  got = run_both(str(tmp_path), vocab_path)
  for run, losses in pinned.items():
    assert got[run].keys() == losses.keys(), run
    for step, loss in losses.items():
      assert abs(got[run][step] - loss) <= 1e-6 * max(1.0, abs(loss)), (run, step, got[run][step], loss)


def record():
  import tempfile
  from bert_jax.text.paths import default_data_dir
  vocab = os.path.join(default_data_dir(), "bert/uncased_L-12_H-768_A-12/vocab.txt")
  with tempfile.TemporaryDirectory() as tmp:
    result = run_both(tmp, vocab)
  with open(PINNED, "w") as f:
    json.dump(result, f, indent=1)
  print({k: len(v) for k, v in result.items()})


if __name__ == "__main__":
  record()
