"""The examples of the public API page run as written.

docs/api/index.md documents its objects with `::: path` lines; each object's docstring
(a class's and its `__call__`'s) holds fenced python examples. Every object there that is
called has at least one, and each runs here, in a fresh namespace, on tiny models.
"""
import ast
import importlib
import inspect
import os
import re
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "docs"))
import griffe_plain  # noqa: E402  pylint: disable=wrong-import-position
sys.path.remove(os.path.join(REPO, "docs"))

FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# Objects the page shows without an example of their own, and why.
NO_EXAMPLE = {
    "bert_jax.models.bert.EncoderOutput": "BertModel's example reads it",
    "bert_jax.models.headed.PreTrainingOutput": "BertForPreTraining's reads it",
    "bert_jax.models.headed.ClassifierOutput": "the classifiers' read it",
    "bert_jax.models.headed.SpanOutput": "BertForQuestionAnswering's reads it",
    "bert_jax.core.task": "a contract: each task module (finetune/, pretrain/) implements it",
}
# Examples only imported here (their names must exist), not run, and why.
NOT_RUN = {
    "bert_jax.run.trainer.train_and_evaluate": "a training run: tests/test_train.py runs it",
}


def page_paths():
  with open(os.path.join(REPO, "docs", "api", "index.md")) as f:
    return [line[4:].strip() for line in f if line.startswith("::: ")]


def resolve(path):
  """The object a dotted path names (its module imported)."""
  parts = path.split(".")
  for cut in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:cut]))
    except ModuleNotFoundError:
      continue
    for name in parts[cut:]:
      obj = getattr(obj, name)
    return obj
  raise ImportError(path)


def examples(path):
  """The fenced python examples of an object's docstring (and of its own `__call__`)."""
  obj = resolve(path)
  docs = [obj.__doc__ or ""]
  if inspect.isclass(obj) and "__call__" in vars(obj):
    docs.append(obj.__call__.__doc__ or "")
  return [code for doc in docs for code in FENCE.findall(inspect.cleandoc(doc))]


EXAMPLES = [(path, i, code) for path in page_paths() if path not in NO_EXAMPLE | NOT_RUN
            for i, code in enumerate(examples(path))]


def test_every_called_object_on_the_page_has_an_example():
  paths = page_paths()
  assert set(NO_EXAMPLE) | set(NOT_RUN) <= set(paths), "an exemption the page no longer has"
  without = [p for p in paths if p not in NO_EXAMPLE and not examples(p)]
  assert not without, f"objects of docs/api/index.md without a python example: {without}"


@pytest.mark.slow
@pytest.mark.parametrize("path,index,code", EXAMPLES, ids=[f"{p}:{i}" for p, i, _ in EXAMPLES])
def test_example_runs(path, index, code, tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's folders
  exec(compile(code, f"<example {index} of {path}>", "exec"), {})  # pylint: disable=exec-used


@pytest.mark.parametrize("path", sorted(NOT_RUN))
def test_example_not_run_imports_what_it_names(path):
  """Its imports run (so the names it shows exist); the rest is a long run, not run here."""
  names = {}
  for code in examples(path):
    tree = ast.parse(code)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    exec(compile(ast.Module(imports, []), f"<imports of {path}>", "exec"),  # pylint: disable=exec-used
         names)
  assert names, f"{path}: no example"


def test_docstrings_render_prose_as_text_and_code_as_code():
  doc = ("What it does, over\ntwo lines with [CLS] and <mask>.\n\n"
         "  model, variables = load(path)   # indented: code\n\n"
         "size: the width (H).\n  wrapped on.\ndepth: L.\n\n"
         "```python\nx = 1\n```")
  parts = griffe_plain.render(doc).parts
  assert parts[0] == "What it does, over two lines with \\[CLS\\] and &lt;mask&gt;."
  assert parts[1].startswith("```python\nmodel, variables = load(path)")
  assert parts[2:4] == ["- `size`: the width (H). wrapped on.", "- `depth`: L."]
  assert parts[4] == "```python\nx = 1\n```"
  assert griffe_plain.joined(parts[2:4]) == "- `size`: the width (H). wrapped on.\n- `depth`: L."
