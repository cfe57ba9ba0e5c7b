"""Pieces every pretraining config shares. Experiment files import this and set sizes."""
import ml_collections

from bert_jax.data.pretraining import default_data_config
from bert_jax.models.config import config_for_size
from bert_jax.optim import default_optim_config


def pretraining_config(size: str, **model_overrides) -> ml_collections.ConfigDict:
  """A complete pretraining config for a model size; files then change what they need."""
  config = ml_collections.ConfigDict()
  config.task = "pretraining"
  config.model = ml_collections.ConfigDict(
      config_for_size(size, **model_overrides).to_json_dict())
  config.init_from = ""  # HF folder, TF checkpoint or bert_jax checkpoint/workdir
  config.data = default_data_config()
  config.optim = default_optim_config()
  config.num_train_steps = 1_000_000
  config.grad_accum_steps = 1
  config.seed = 0
  config.log_every_steps = 100
  config.eval_every_steps = 10_000
  config.eval_batches = 0  # 0 = the whole held-out set
  config.checkpoint_every_steps = 10_000
  config.max_checkpoints_to_keep = 3
  # Mesh axes (-1 = all remaining devices) and the logical-axis rules (None = defaults in
  # bert_jax/sharding.py; else a list of [logical name, mesh axis or list or None]).
  config.mesh = ml_collections.ConfigDict(dict(data=-1, fsdp=1, tensor=1))
  config.logical_axis_rules = ml_collections.FieldReference(None, field_type=list)
  return config


def parse_arg(arg: str | None, **defaults) -> ml_collections.ConfigDict:
  """'a=1,b=x' -> ConfigDict, typed by the defaults (big_vision style)."""
  parsed = ml_collections.ConfigDict(defaults)
  for item in (arg or "").split(","):
    if not item:
      continue
    key, _, value = item.partition("=")
    if key not in defaults:
      raise ValueError(f"config arg {key!r}: expected one of {sorted(defaults)}")
    kind = type(defaults[key])
    parsed[key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
  return parsed
