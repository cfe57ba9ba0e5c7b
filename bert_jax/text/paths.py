"""The one data root: every task/corpus path in a config is relative to it.

`resolve(data_dir, path)` is the one resolver: an absolute path passes through, a relative
one joins the data root, which is `data_dir` when given (config.data.data_dir, --data_dir)
and otherwise `default_data_dir()`:
  1. the environment variable BERT_JAX_DATA_DIR;
  2. `../shared/data` next to the working directory, or next to this repository's checkout,
     when that folder exists;
  3. otherwise `~/.cache/bert_jax/data` (CACHE_DIR), where `python -m bert_jax.commands.download`
     puts the files when none of the above is there.
Readers and the downloader use this same rule, so what the downloader fetched is found.
The root may be a bucket (gs://bucket/data): a relative path then joins it as a URL, which
every reader here opens through bert_jax.files.storage.
"""
import os
import pathlib

from bert_jax.files import storage

ENV_VAR = "BERT_JAX_DATA_DIR"
_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE_DIR = os.path.join("~", ".cache", "bert_jax", "data")


def default_data_dir() -> str:
  """The data root when no `data_dir` is given (module docstring: env, ../shared/data, cache)."""
  env = os.environ.get(ENV_VAR)
  if env:
    return env
  for base in (pathlib.Path.cwd(), _REPO_ROOT):
    candidate = base.parent / "shared" / "data"
    if candidate.is_dir():
      return str(candidate)
  return os.path.expanduser(CACHE_DIR)


def resolve(data_dir: str | None, relative_path: str, urls: bool = False) -> str:
  """Joins a config-relative path onto the data root; absolute paths pass through.

  data_dir: the root; "" or None means `default_data_dir()`; a local folder or a URL.
  A URL path (gs://bucket/...) is not a path under the root: it passes through where the
  caller reads it through `bert_jax.files.storage` (urls=True), and is refused otherwise
  (ValueError naming it); so is a relative path under a URL root.
  """
  if urls and storage.is_url(relative_path):
    return relative_path
  storage.local_only(relative_path, "reading data files")
  if os.path.isabs(relative_path):
    return relative_path
  root = data_dir or default_data_dir()
  if not urls:
    storage.local_only(root, f"the reader of {relative_path}")
  return storage.join(root, relative_path)
