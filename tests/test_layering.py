"""The package's layering (pyproject.toml [tool.importlinter]): every import points down.

`lint-imports` checks the contract on the real package; the second test shows it is not
vacuous: the same contract on a copy with one upward import (text/ -> trainer) is broken.
"""
import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lint(cwd):
  lint = os.path.join(os.path.dirname(sys.executable), "lint-imports")
  return subprocess.run([lint, "--no-cache"], cwd=cwd, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": cwd})


def test_every_import_points_down():
  result = _lint(REPO)
  assert result.returncode == 0, result.stdout + result.stderr
  assert "1 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
  shutil.copytree(os.path.join(REPO, "bert_jax"), tmp_path / "bert_jax",
                  ignore=shutil.ignore_patterns("__pycache__"))
  shutil.copy(os.path.join(REPO, "pyproject.toml"), tmp_path)
  paths = tmp_path / "bert_jax" / "text" / "paths.py"
  paths.write_text(paths.read_text() + "\nfrom bert_jax.run import trainer  # upward\n")
  result = _lint(str(tmp_path))
  assert result.returncode != 0
  assert "bert_jax.text.paths -> bert_jax.run.trainer" in result.stdout, result.stdout
