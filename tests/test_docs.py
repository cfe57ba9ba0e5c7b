"""The docs site and the product's text.

- `mkdocs build --strict` passes: a broken link, a broken anchor, a page missing from the
  nav or a docstring mkdocstrings cannot render fails it (mkdocs.yml's `validation`);
- the generated configs reference (docs/gen_configs.py) is current;
- no product file speaks of the project's development: numbered work logs, issue numbers,
  the machine a number came from named as "this" one instead of by its model (history goes
  to CHANGELOG.md, by date and commit). This file's own examples are spelled in pieces, so
  it passes its own check.
"""
import glob
import json
import os
import re
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Development history in product text: a numbered work log, an issue reference (a hash and
# a number; not a quoted column name such as MRPC's "#1 String"), the machine named as "this".
HISTORY = re.compile(r"(?i)\bsessions?[ ]\d|(?<![\w\"'&/])#\d+\b|\bthis[ ]host\b")
# The product's text: every file a reader of the software reads (CHANGELOG.md excluded).
PRODUCT_GLOBS = ("README.md", "CONTRIBUTING.md", "CITATION.cff", "mkdocs.yml",
                 "docs/**/*.md", "docs/**/*.py", "experiments/*.md", "experiments/*.py",
                 "experiments/sweeps/*.py", "configs/*.py", "bert_jax/**/*.py",
                 "tests/**/*.py", "bench/**/*.py", "bench/**/*.sh", "scripts/*.sh", ".ci/run")


def product_texts():
  """(path, text) of every product file; notebooks give their markdown cells."""
  for pattern in PRODUCT_GLOBS:
    for path in sorted(glob.glob(os.path.join(REPO, pattern), recursive=True)):
      with open(path, encoding="utf-8") as f:
        yield os.path.relpath(path, REPO), f.read()
  for path in sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb"))):
    with open(path, encoding="utf-8") as f:
      cells = json.load(f)["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    yield os.path.relpath(path, REPO), markdown


def history_lines(text):
  return [line.strip() for line in text.splitlines() if HISTORY.search(line)]


def test_history_pattern_finds_what_it_should():
  log = "measured in sess" "ion 12, alone"
  issue = "the payoff question (#" "18; not yet)"
  machine = "on this h" "ost it reads 2.07x"
  assert history_lines(log + "\nok line") == [log]
  assert history_lines(issue) == [issue]
  assert history_lines(machine) == [machine]
  assert not history_lines('*_pair("#1 String", "#2 String", "Quality")')
  assert not history_lines("measured 2026-11-27 on 5ce9d9b, a 2-core Intel Xeon")


def test_product_files_carry_no_development_history():
  found = [f"{path}: {line[:100]}" for path, text in product_texts()
           for line in history_lines(text)]
  assert not found, ("development history in product files (move it to CHANGELOG.md; a "
                     "measurement names its date, commit and machine):\n" + "\n".join(found))


def test_mkdocs_config_fails_on_missing_pages_and_broken_links():
  with open(os.path.join(REPO, "mkdocs.yml")) as f:
    config = yaml.load(f, Loader=yaml.SafeLoader)
  assert config["strict"] is True
  assert config["validation"]["nav"]["omitted_files"] == "warn"
  assert config["validation"]["links"]["not_found"] == "warn"
  assert config["validation"]["links"]["anchors"] == "warn"


def test_docs_build_strict(tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
      cwd=REPO, capture_output=True, text=True, timeout=600,
      env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
  assert result.returncode == 0, result.stderr[-3000:]
  for page in ("index.html", "reference/configs/index.html", "reference/commands/index.html",
               "api/models/index.html", "results/sweeps/index.html"):
    assert os.path.exists(tmp_path / page), page
  with open(tmp_path / "api" / "models" / "index.html") as f:
    assert "BertConfig" in f.read()  # the API reference rendered the docstrings
  with open(tmp_path / "reference" / "commands" / "index.html") as f:
    assert "--compile_only" in f.read()  # every program's flags, read from its source
  with open(tmp_path / "api" / "index.html") as f:
    public = f.read()
  # The public page: a model's call arguments, its output's fields in a table, docstrings
  # as paragraphs (not one preformatted block each).
  assert 'id="bert_jax.models.bert.BertModel.__call__"' in public
  assert "<li><code>masked_lm_positions</code>" in public
  assert "<td><code>sequence_output</code></td>" in public
  assert public.count("<p>") > 3 * public.count("<pre")


def test_config_reference_is_current():
  result = subprocess.run([sys.executable, os.path.join("docs", "gen_configs.py"), "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def test_the_generated_pages_are_committed_and_current():
  """docs/hooks.py's pages (API package pages, commands, sweeps, payoff) are in the
  repository, so links to them resolve on a repository viewer as in the built site."""
  result = subprocess.run([sys.executable, os.path.join("docs", "hooks.py"), "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def test_a_field_without_a_meaning_fails_the_reference_check():
  sys.path.insert(0, os.path.join(REPO, "docs"))
  try:
    import gen_configs
  finally:
    sys.path.remove(os.path.join(REPO, "docs"))
  page = ("| field | default | meaning |\n|---|---|---|\n| `seed` | `0` | the model's seed |\n"
          "| `optim.eps` | `1e-06` |  |\n")
  assert gen_configs.without_meaning(page) == ["`optim.eps`"]
