"""Every config file loads, builds its model config, and rejects typos."""
import os
import subprocess
import sys

import pytest

from bert_jax.models.config import BertConfig
from configs import base, large, modernbert, roberta, spanbert, tiny

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("module,layers", [(tiny, 2), (base, 12), (large, 24), (roberta, 2),
                                          (spanbert, 2), (modernbert, 3)])
@pytest.mark.parametrize("runlocal", [False, True])
def test_configs_build(module, layers, runlocal):
  config = module.get_config(f"runlocal={runlocal}")
  assert BertConfig(**config.model).num_hidden_layers == layers
  assert config.data.batch_size % config.grad_accum_steps == 0
  assert config.data.max_seq_length <= config.model.max_position_embeddings


def test_unknown_config_arg_is_an_error():
  with pytest.raises(ValueError, match="config arg 'runlocl'"):
    tiny.get_config("runlocl=True")


def test_config_override_typo_is_rejected():
  out = subprocess.run(
      [sys.executable, "-m", "bert_jax.train", f"--config={REPO}/configs/tiny.py",
       "--workdir=/tmp/never_used", "--config.optim.learning_rat=1e-3"],
      capture_output=True, text=True, cwd=REPO)
  assert out.returncode != 0
  assert "learning_rat" in out.stderr
