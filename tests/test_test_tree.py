"""The test tree's own rule: what test files share lives in tests/helpers/ (and fixtures in
conftest.py, which pytest hands to every file); no test file imports from another test file
or from conftest.py, so a test file can be read, moved or deleted on its own."""
import ast
import os

TESTS = os.path.dirname(os.path.abspath(__file__))


def imports_of_test_files(source: str) -> list[tuple[int, str]]:
  """(line, module) of each import of a test file or of conftest in source."""
  found = []
  for node in ast.walk(ast.parse(source)):
    names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
             else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
    for name in names:
      parts = name.split(".")
      if parts[0] == "tests":
        parts = parts[1:]
      if len(parts) == 1 and (parts[0].startswith("test_") or parts[0] == "conftest"):
        found.append((node.lineno, name))
  return found


def test_no_test_file_imports_another_test_file_or_conftest():
  bad = []
  for root, _, files in os.walk(TESTS):
    for name in sorted(files):
      if name.endswith(".py"):
        path = os.path.join(root, name)
        with open(path) as f:
          bad += [f"{os.path.relpath(path, TESTS)}:{line}: imports {module}"
                  for line, module in imports_of_test_files(f.read())]
  assert not bad, "shared helpers belong in tests/helpers/:\n" + "\n".join(bad)


def test_the_rule_sees_each_spelling():
  source = ("from tests.test_finetune import small_bert\nfrom test_targets import x\n"
            "from tests.conftest import REPO\nimport tests.test_nsp_pairs\n"
            "from tests.helpers.runs import REPO\nfrom tests.extension import xlm_roberta\n")
  assert [line for line, _ in imports_of_test_files(source)] == [1, 2, 3, 4]
