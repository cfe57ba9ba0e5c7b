"""The runtime requirements match the code: every import of bert_jax/, configs/,
experiments/ and scripts/ resolves to the standard library, the project itself, or a
distribution that requirements.txt names; pyproject.toml's `dependencies` name the same
distributions, each with a range that requirements.txt's pin satisfies.

A runtime import that only the test stack brings (scikit-learn once came in through
sentence-transformers alone) fails `test_runtime_imports_are_required`; the second test
shows the check is not vacuous. An import inside `try: ... except ImportError:` is optional
(the code works without it) and is not counted. Test-only imports live in tests/ and bench/.
"""
import ast
import importlib.metadata
import os
import re
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.version import Version

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME_ROOTS = ("bert_jax", "configs", "experiments", "scripts")
FIRST_PARTY = {"bert_jax", "configs", "experiments"}


def _normalise(name: str) -> str:
  return re.sub(r"[-_.]+", "-", name).lower()


def _catches_import_error(node: ast.Try) -> bool:
  names = set()
  for handler in node.handlers:
    caught = handler.type
    for item in (caught.elts if isinstance(caught, ast.Tuple) else [caught]):
      if isinstance(item, ast.Name):
        names.add(item.id)
  return bool(names & {"ImportError", "ModuleNotFoundError"})


def _required_imports(tree: ast.AST) -> set[str]:
  """Top-level module names imported outside `try/except ImportError` blocks."""
  found = set()

  def visit(node, optional):
    if isinstance(node, ast.Import) and not optional:
      found.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and not optional and node.level == 0:
      found.add(node.module.split(".")[0])
    if isinstance(node, ast.Try) and _catches_import_error(node):
      for child in node.body:
        visit(child, True)
      for child in node.handlers + node.orelse + node.finalbody:
        visit(child, optional)
      return
    for child in ast.iter_child_nodes(node):
      visit(child, optional)

  visit(tree, False)
  return found


def requirement_names(path: str) -> dict[str, Requirement]:
  """Normalised distribution name -> requirement, for each requirement line of a file."""
  out = {}
  with open(path) as f:
    for line in f:
      line = line.split("#", 1)[0].strip()
      if line and not line.startswith("-"):
        requirement = Requirement(line)
        out[_normalise(requirement.name)] = requirement
  return out


def missing_requirements(repo: str, roots=RUNTIME_ROOTS,
                         requirements: str = "requirements.txt") -> list[str]:
  """`path: imports MODULE (distribution ...), which requirements.txt does not name`, one
  line per import of a distribution the file does not name."""
  required = set(requirement_names(os.path.join(repo, requirements)))
  distributions = importlib.metadata.packages_distributions()
  problems = []
  for root in roots:
    for folder, _, files in os.walk(os.path.join(repo, root)):
      for name in sorted(files):
        if not name.endswith(".py"):
          continue
        path = os.path.join(folder, name)
        with open(path) as f:
          modules = _required_imports(ast.parse(f.read(), path))
        for module in sorted(modules - FIRST_PARTY - set(sys.stdlib_module_names)):
          providers = {_normalise(d) for d in distributions.get(module, [])}
          if not providers & required:
            problems.append(f"{os.path.relpath(path, repo)}: imports {module} "
                            f"(distribution {', '.join(sorted(providers)) or 'not installed'}), "
                            f"which {requirements} does not name")
  return problems


def test_runtime_imports_are_required():
  assert missing_requirements(REPO) == []


def test_an_import_only_the_test_stack_has_is_caught(tmp_path):
  (tmp_path / "bert_jax").mkdir()
  (tmp_path / "bert_jax" / "vectors.py").write_text(
      "import numpy\nfrom sklearn.utils.extmath import randomized_svd\n"
      "try:\n  import pynvml  # optional\nexcept ImportError:\n  pynvml = None\n")
  (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
  problems = missing_requirements(str(tmp_path), roots=("bert_jax",))
  assert len(problems) == 1 and problems[0].startswith(
      f"bert_jax{os.sep}vectors.py: imports sklearn (distribution scikit-learn)"), problems


def pyproject() -> dict:
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


def dependency_ranges(project: dict) -> dict[str, Requirement]:
  return {_normalise(Requirement(line).name): Requirement(line)
          for line in project["dependencies"]}


def test_pyproject_dependencies_match_the_pins():
  project = pyproject()
  pins = requirement_names(os.path.join(REPO, "requirements.txt"))
  ranges = dependency_ranges(project)
  assert set(ranges) == set(pins)
  for name, pin in pins.items():
    version = next(iter(pin.specifier)).version
    assert ranges[name].specifier.contains(version), (name, str(ranges[name].specifier))
  # Python: the pins need 3.11 (numpy 2.4, jax 0.10); the metadata must say so.
  assert project["requires-python"] == ">=3.11"
  test_pins = requirement_names(os.path.join(REPO, "requirements-test.txt"))
  extras = {_normalise(Requirement(line).name): Requirement(line)
            for line in project["optional-dependencies"]["test"]}
  assert set(extras) == set(test_pins)


def test_the_docs_extra_installs_what_builds_the_site():
  """[docs] is the test extra's part that mkdocs.yml needs: the theme and the API plugin,
  at the ranges the test extra gives them (so `pip install ".[docs]"` builds the site)."""
  extras = pyproject()["optional-dependencies"]
  docs = {Requirement(line).name: str(Requirement(line).specifier) for line in extras["docs"]}
  test = {Requirement(line).name: str(Requirement(line).specifier) for line in extras["test"]}
  with open(os.path.join(REPO, "mkdocs.yml")) as f:
    site = f.read()
  assert "name: material" in site and "mkdocstrings" in site
  assert docs == {name: test[name] for name in ("mkdocs-material", "mkdocstrings-python")}


def test_the_newest_set_is_inside_the_ranges():
  """requirements-newest.txt (what scripts/newest_jax_check.sh installs in place of the
  pins of the same names) pins distributions of requirements.txt, each at or above its pin
  and inside its pyproject.toml range: the ranges' newest end is a tested one."""
  pins = requirement_names(os.path.join(REPO, "requirements.txt"))
  newest = requirement_names(os.path.join(REPO, "requirements-newest.txt"))
  ranges = dependency_ranges(pyproject())
  assert newest and set(newest) <= set(pins), sorted(set(newest) - set(pins))
  for name, requirement in newest.items():
    (spec,) = requirement.specifier
    assert spec.operator == "==", (name, str(requirement))
    assert Version(spec.version) >= Version(next(iter(pins[name].specifier)).version), name
    assert ranges[name].specifier.contains(spec.version), (name, str(ranges[name].specifier))


def test_accelerator_extras_follow_jax():
  """[tpu], [cuda12] and [cuda13] are jax's own extras over the range of `dependencies`,
  and the installed jax (the pin) provides each."""
  project = pyproject()
  jax_range = dependency_ranges(project)["jax"].specifier
  provided = set(importlib.metadata.metadata("jax").get_all("Provides-Extra"))
  for extra in ("tpu", "cuda12", "cuda13"):
    (line,) = project["optional-dependencies"][extra]
    requirement = Requirement(line)
    assert (requirement.name, requirement.extras) == ("jax", {extra}), line
    assert requirement.specifier == jax_range, (line, str(jax_range))
    assert extra in provided, (extra, sorted(provided))
