"""TensorFlow is imported on first use (bert_jax/startup/lazy.py): `import bert_jax` and every
command line's module import without it, and the handle is the real module once read."""
import concurrent.futures
import os
import subprocess
import sys
import types

import pytest

from bert_jax.startup import lazy

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Every `python -m` entry point (pyproject.toml's console scripts and the documented ones),
# the package and the task table the trainer reads.
COMMAND_LINES = ("bert_jax", "bert_jax.train", "bert_jax.commands.fill_mask", "bert_jax.commands.embed",
                 "bert_jax.commands.tag_spans", "bert_jax.commands.convert", "bert_jax.text.prepare",
                 "bert_jax.text.learn_vocab", "bert_jax.pretrain.word_vectors",
                 "bert_jax.pretrain.inspect", "bert_jax.probe.syntax_heads",
                 "bert_jax.run.compile_report", "bert_jax.run.tasks", "bert_jax.commands.console",
                 "bert_jax.commands.download")


def _run(code: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                        text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300)


@pytest.mark.slow
def test_the_package_and_its_command_lines_import_without_tensorflow():
  result = _run(
      "import importlib, sys\n"
      "from absl import flags\n"
      "shared = set(flags.FLAGS)\n"
      f"for name in {COMMAND_LINES!r}:\n"
      "  importlib.import_module(name)\n"
      "  for flag in set(flags.FLAGS) - shared:  # each program defines its own\n"
      "    delattr(flags.FLAGS, flag)\n"
      "  heavy = sorted(m for m in ('tensorflow', 'tensorflow_text', 'tensorflow_datasets')\n"
      "                 if m in sys.modules)\n"
      "  assert not heavy, f'importing {name} imported {heavy}'\n"
      "from bert_jax.startup.lazy import tensorflow as tf\n"
      "assert not tf.loaded\n"
      "assert tf.constant([1, 2]).shape == (2,) and tf.loaded\n"
      "assert tf.config.get_visible_devices('GPU') == []\n"
      "print('ok')\n")
  assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_the_handle_reads_through_to_the_module_once(monkeypatch):
  imported = []
  real = types.ModuleType("fake_heavy")
  real.value = 3
  monkeypatch.setitem(sys.modules, "fake_heavy", real)
  handle = lazy.LazyModule("fake_heavy", on_import=imported.append)
  assert not handle.loaded and imported == []

  with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
    values = list(pool.map(lambda _: handle.value, range(32)))
  assert values == [3] * 32
  assert imported == [real]  # on_import ran once, whichever thread read first
  assert handle.loaded and "value" in vars(handle)  # later reads skip __getattr__
  try:
    handle.missing
  except AttributeError as error:
    assert "missing" in str(error)
  else:
    raise AssertionError("a missing attribute read as something")
