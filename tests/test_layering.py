"""The package's layering (pyproject.toml [tool.importlinter]): every import points down.

`lint-imports` checks the contracts on the real package (the layers, and the training path
importing no task module); the second test shows they are not vacuous: on a copy with one
upward import (text/ -> trainer) and one task import (trainer -> finetune/) both are broken.
The import graph (grimp, which import-linter builds on) is checked whole too: no circle
between folders, and no module at the package root but the entry point and __init__.py.
"""
import json
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
  assert "2 kept, 0 broken" in result.stdout


def test_an_upward_import_and_a_task_import_in_the_trainer_break_the_contracts(tmp_path):
  shutil.copytree(os.path.join(REPO, "bert_jax"), tmp_path / "bert_jax",
                  ignore=shutil.ignore_patterns("__pycache__"))
  shutil.copy(os.path.join(REPO, "pyproject.toml"), tmp_path)
  paths = tmp_path / "bert_jax" / "text" / "paths.py"
  paths.write_text(paths.read_text() + "\nfrom bert_jax.run import trainer  # upward\n")
  trainer = tmp_path / "bert_jax" / "run" / "trainer.py"
  trainer.write_text(trainer.read_text() + "\nfrom bert_jax.finetune import base  # a task's\n")
  result = _lint(str(tmp_path))
  assert result.returncode != 0
  assert "bert_jax.text.paths -> bert_jax.run.trainer" in result.stdout, result.stdout
  assert "bert_jax.run.trainer -> bert_jax.finetune.base" in result.stdout, result.stdout
  assert "0 kept, 2 broken" in result.stdout, result.stdout


ROOT_MODULES = {"bert_jax", "bert_jax.train"}  # __init__.py and the entry point

# Run in a fresh process on PYTHONPATH's bert_jax: grimp finds the package by import, and
# this process has imported the real one already. Prints {"cycle": [...], "root": [...]}.
_GRAPH_REPORT = """
import json, grimp
graph = grimp.build_graph("bert_jax", cache_dir=None)
packages = {m for m in graph.modules if graph.find_children(m)}
def folder(module):
  top = ".".join(module.split(".")[:2])
  return top if top in packages else "bert_jax"
edges = {}
for module in graph.modules:
  for imported in graph.find_modules_directly_imported_by(module):
    a, b = folder(module), folder(imported)
    if a != b:
      edges.setdefault(a, {}).setdefault(b, f"{module} -> {imported}")
def find_cycle():
  state, path = {}, []
  def visit(node):
    state[node] = "open"
    path.append(node)
    for nxt in sorted(edges.get(node, {})):
      if state.get(nxt) == "open":
        return path[path.index(nxt):] + [nxt]
      if nxt not in state and (found := visit(nxt)):
        return found
    state[node] = "done"
    path.pop()
    return None
  for node in sorted(edges):
    if node not in state and (found := visit(node)):
      return [edges[a][b] for a, b in zip(found, found[1:])]
  return []
root = sorted(m for m in graph.modules if folder(m) == "bert_jax" and m not in packages)
print(json.dumps({"cycle": find_cycle(), "root": root}))
"""


def _graph_report(cwd):
  result = subprocess.run([sys.executable, "-c", _GRAPH_REPORT], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": cwd}, check=True)
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_no_circle_between_folders_and_only_the_entry_point_at_the_root():
  report = _graph_report(REPO)
  assert report["cycle"] == [], "a circle between folders: " + "; ".join(report["cycle"])
  assert set(report["root"]) <= ROOT_MODULES, (
      f"modules at the package root beyond {sorted(ROOT_MODULES)}: {report['root']}")


def test_a_circle_and_a_root_module_are_found(tmp_path):
  shutil.copytree(os.path.join(REPO, "bert_jax"), tmp_path / "bert_jax",
                  ignore=shutil.ignore_patterns("__pycache__"))
  paths = tmp_path / "bert_jax" / "text" / "paths.py"
  paths.write_text(paths.read_text() + "\nfrom bert_jax.run import trainer  # upward\n")
  (tmp_path / "bert_jax" / "helpers.py").write_text('"""A module at the root."""\n')
  report = _graph_report(str(tmp_path))
  assert "bert_jax.text.paths -> bert_jax.run.trainer" in report["cycle"], report
  assert "bert_jax.helpers" in report["root"], report
