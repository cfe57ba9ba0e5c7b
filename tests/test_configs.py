"""Every config file loads, builds its model config, and rejects typos."""
import os
import subprocess
import sys

import pytest

from bert_jax.startup import config_flag
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


def test_a_renamed_config_arg_names_its_new_spelling():
  """GLUE's dataset was `task=` (a second meaning of "task"): refused with the new name."""
  from configs import glue
  with pytest.raises(ValueError, match=r"^config arg 'task' is now 'dataset': dataset=rte$"):
    glue.get_config("task=rte")
  assert glue.get_config("dataset=rte").data.dataset == "rte"


def test_config_override_typo_is_rejected():
  out = subprocess.run(
      [sys.executable, "-m", "bert_jax.train", f"--config={REPO}/configs/tiny.py",
       "--workdir=/tmp/never_used", "--config.optim.learning_rat=1e-3"],
      capture_output=True, text=True, cwd=REPO)
  assert out.returncode != 0
  assert "learning_rat" in out.stderr


def test_embedding_size_is_settable_from_the_command_line():
  """An unset (None) embedding_size still takes `--config.model.embedding_size=64`: the
  factorized-embedding ablation of any pretraining config."""
  from absl import flags
  from ml_collections import config_flags
  argv = ["prog", f"--config={REPO}/configs/tiny.py", "--config.model.embedding_size=64"]
  flag_values = flags.FlagValues()
  holder = config_flags.DEFINE_config_file("config", flag_values=flag_values, sys_argv=argv)
  flag_values(argv)
  model = BertConfig(**holder.value.model)
  assert model.embedding_size == 64 and model.projects_embeddings
  assert BertConfig(**tiny.get_config().model).embedding_size is None


def test_every_split_has_a_source_to_point_elsewhere():
  """--config.data.sources.<split>=PATH needs the key (ml_collections refuses new ones)."""
  from configs import conll, glue, squad, swag
  assert set(glue.get_config("dataset=sst2").data.sources) == {"train", "dev", "test"}
  assert set(glue.get_config("dataset=mnli").data.sources) == {
      "train", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched"}
  assert set(conll.get_config().data.sources) == {"train", "dev", "test"}
  assert set(squad.get_config("version=2.0").data.sources) == {"train", "dev"}
  assert set(swag.get_config().data.sources) == {"train", "dev", "test"}


def test_the_package_ships_the_configs_folder_itself():
  """bert_jax/configs is configs/ (one source, a link): the same files, and each file with a
  get_config is a name --config takes."""
  assert os.path.realpath(config_flag.CONFIGS_DIR) == os.path.join(REPO, "configs")
  files = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "configs"))
                 if f.endswith(".py") and f not in ("__init__.py", "common.py"))
  assert config_flag.shipped_names() == files


OWN_CONFIG = """from bert_jax.configs import glue
from bert_jax.configs.common import parse_arg


def get_config(arg=None):
  arg = parse_arg(arg, lr=1e-4)
  config = glue.get_config("dataset=rte,runlocal=True")
  config.optim.learning_rate = arg.lr
  return config
"""


def parsed_config(value: str):
  from absl import flags
  argv = ["prog", f"--config={value}", "--config.num_train_epochs=2"]
  flag_values = flags.FlagValues()
  holder = config_flag.define_config("config", "A config.", flag_values=flag_values,
                                     sys_argv=argv)
  flag_values(argv)
  return holder.value


def test_a_shipped_config_by_name_or_a_config_of_ones_own(tmp_path, monkeypatch):
  """From a directory outside the repository: `glue:dataset=mrpc,runlocal=True` is the
  shipped glue.py with its argument; a config file there (by relative or absolute path,
  with its own argument) builds on the shipped ones through bert_jax.configs; overrides
  apply to both."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "my_config.py").write_text(OWN_CONFIG)
  shipped = parsed_config("glue:dataset=mrpc,runlocal=True")
  assert (shipped.data.dataset, shipped.data.train_examples) == ("mrpc", 64)
  assert shipped.num_train_epochs == 2
  for value in ("my_config.py:lr=0.001", f"{tmp_path}/my_config.py:lr=0.001"):
    own = parsed_config(value)
    assert (own.data.dataset, own.optim.learning_rate, own.num_train_epochs) == (
        "rte", 0.001, 2), value


def test_an_unknown_config_name_lists_the_shipped_ones():
  with pytest.raises(ValueError, match=r"^no shipped config named 'glu': use one of albert, "
                     r"base, .*, glue, .*, tiny, or a path to a \.py config file$"):
    config_flag.resolve("glu:dataset=sst2")
  assert config_flag.resolve("configs/glu.py:x=1") == "configs/glu.py:x=1"  # a path: kept
