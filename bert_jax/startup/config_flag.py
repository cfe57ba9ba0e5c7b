"""The `--config` flag of every program: a config file, or a shipped config by name.

  bert-jax-train --config=glue:dataset=sst2 --workdir=runs/sst2        # shipped, by name
  bert-jax-train --config=configs/glue.py:dataset=sst2 --workdir=...   # a file (a fork)

The configs of the repository's configs/ ship inside the package as `bert_jax.configs`
(bert_jax/configs is a link to that folder; pyproject.toml says why), so a name works
from any directory once the package is installed, and a config file of one's own imports
the shared pieces as `from bert_jax.configs.common import parse_arg`. What comes after
the first `:` goes to the config's `get_config(arg)`, as ml_collections' config files do.
A value with a `/` or a `.py` ending, or one naming an existing file, is a path; an
unknown name is an error that lists the shipped ones.

This module imports nothing else from bert_jax (it finds the configs as files, the way
ml_collections loads them), so programs of every layer can define the flag.
"""
import os

from absl import flags
from ml_collections import config_flags

# The flag belongs to the program that calls define_config (its --help lists it).
flags.disclaim_key_flags()

CONFIGS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def shipped_names() -> list[str]:
  """The shipped configs' names: the files of bert_jax/configs that define get_config."""
  names = []
  for file_name in sorted(os.listdir(CONFIGS_DIR)):
    stem, ext = os.path.splitext(file_name)
    if ext == ".py" and not stem.startswith("_"):
      with open(os.path.join(CONFIGS_DIR, file_name)) as f:
        if "\ndef get_config(" in f.read():
          names.append(stem)
  return names


def _is_path(spec: str) -> bool:
  return "/" in spec or os.sep in spec or spec.endswith(".py") or os.path.isfile(spec)


def resolve(value: str) -> str:
  """`glue:dataset=sst2` -> `<package>/configs/glue.py:dataset=sst2`; a path is kept."""
  spec, colon, arg = value.partition(":")
  if not spec or _is_path(spec):
    return value
  if spec not in shipped_names():
    raise ValueError(f"no shipped config named {spec!r}: use one of "
                     f"{', '.join(shipped_names())}, or a path to a .py config file")
  return os.path.join(CONFIGS_DIR, spec + ".py") + colon + arg


class _ShippedOrFileParser(flags.ArgumentParser):
  """ml_collections' config-file parser (`inner`), a shipped config's name resolved first."""

  def __init__(self, inner: flags.ArgumentParser):
    self._inner = inner

  def parse(self, argument):
    return self._inner.parse(resolve(argument))

  def flag_type(self):
    return self._inner.flag_type()


def define_config(name: str, help_string: str, flag_values: flags.FlagValues = flags.FLAGS,
                  **kwargs) -> flags.FlagHolder:
  """`config_flags.DEFINE_config_file(name, lock_config=True)` (a typo in an override is an
  error) whose value may also be a shipped config's name; `kwargs` go to it (`sys_argv`)."""
  holder = config_flags.DEFINE_config_file(
      name, None, f"{help_string} A .py file (configs/tiny.py:runlocal=True) or a shipped "
      f"config by name (tiny:runlocal=True; one of {', '.join(shipped_names())}).",
      flag_values=flag_values, lock_config=True, **kwargs)
  flag = flag_values[name]
  flag.parser = _ShippedOrFileParser(flag.parser)
  return holder
