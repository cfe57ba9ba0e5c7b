"""notebooks/ run top to bottom (executed with nbclient) as a Colab user runs them.

Each notebook starts with an "Open in Colab" link and an install cell built from
pyproject.toml's Repository URL, fetches its data into a data root with bert_jax.commands.download,
and needs no checkout. Here every one runs with its working directory outside the
repository, a fresh data root and BERT_JAX_DATA_MIRROR naming a mirror on 127.0.0.1 of
raw.githubusercontent.com (the data root's files, and the repository's committed results
at main). The package is the checkout's (on PYTHONPATH; the install cell finds it and
installs nothing), or, when BERT_JAX_PIP_URL is set (scripts/newest_jax_check.sh sets it to
a wheel of the checkout, in a clean environment, with the kernel BERT_JAX_NOTEBOOK_KERNEL),
the install cell's install from that URL.
"""
import ast
import glob
import json
import os
import re
import shutil
import subprocess
import tomllib

import nbformat
import pytest
from nbclient import NotebookClient

from bert_jax.commands import download
from tests.helpers.data_mirror import Mirror

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.ipynb")))
PIP_URL = "BERT_JAX_PIP_URL"
KERNEL = "BERT_JAX_NOTEBOOK_KERNEL"
COMMITTED = "experiments/results/syntax_heads"  # what_bert_learns reads these from GitHub


def repository() -> str:
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]["urls"]["Repository"]


def colab_link(path: str) -> str:
  github = "https://github.com/"
  assert repository().startswith(github), repository()
  return (f"https://colab.research.google.com/github/{repository()[len(github):]}/blob/main/"
          f"notebooks/{os.path.basename(path)}")


def test_each_notebook_opens_in_colab_and_installs_from_the_repository():
  assert len(NOTEBOOKS) == 5
  with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  for path in NOTEBOOKS:
    cells = nbformat.read(path, as_version=4).cells
    first_markdown = next(c for c in cells if c.cell_type == "markdown")
    links = re.findall(r"\]\((https://colab\.research\.google\.com/github/[^)]*)\)",
                       first_markdown.source)
    assert links == [colab_link(path)], (path, links)
    assert colab_link(path) in readme, path
    install = next(c for c in cells if c.cell_type == "code").source
    assert f'REPOSITORY = "{repository()}"' in install and PIP_URL in install, path
    assert "'git+' + REPOSITORY" in install, path
    for cell in cells:  # nothing of a checkout, no placeholder
      for text in ("<you>", "../shared/data", "from configs", "sys.path", "experiments."):
        assert text not in cell.source, (path, text)


def install_cells() -> dict[str, str]:
  return {os.path.basename(path): next(c for c in nbformat.read(path, as_version=4).cells
                                       if c.cell_type == "code").source for path in NOTEBOOKS}


def test_the_install_cell_picks_jaxs_extra_by_the_runtime(monkeypatch, tmp_path):
  """accelerator_extra() of each install cell, run alone: a TPU runtime's variables give
  [tpu], an nvidia-smi that lists a GPU [cuda12], one that fails (no driver) or none, CPU;
  each extra is one of pyproject.toml's."""
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
  nvidia_smi = tmp_path / "nvidia-smi"
  for name in ("COLAB_TPU_ADDR", "TPU_NAME"):
    monkeypatch.delenv(name, raising=False)
  monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
  for name, source in install_cells().items():
    [function] = [node for node in ast.parse(source).body
                  if isinstance(node, ast.FunctionDef) and node.name == "accelerator_extra"]
    scope = {}
    exec(compile(ast.Module([function], []), name, "exec"), scope)  # pylint: disable=exec-used
    scope.update(glob=glob, os=os, shutil=shutil, subprocess=subprocess)
    extra = scope["accelerator_extra"]
    if not glob.glob("/dev/accel*"):  # a TPU VM's chips
      assert extra() == "", name
      nvidia_smi.write_text("#!/bin/sh\nexit 9\n")
      nvidia_smi.chmod(0o755)
      assert extra() == "", name
      nvidia_smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100'\n")
      assert extra() == "[cuda12]", name
      nvidia_smi.unlink()
    monkeypatch.setenv("TPU_NAME", "local")
    assert extra() == "[tpu]", name
    monkeypatch.delenv("TPU_NAME")
    assert {"tpu", "cuda12"} <= set(extras), extras


@pytest.fixture
def colab(data_dir, monkeypatch, tmp_path):
  """A Colab user's place: a working directory outside the repository, a fresh data root
  filled from a mirror of raw.githubusercontent.com, the package installed by the install
  cell from BERT_JAX_PIP_URL, else the checkout's on PYTHONPATH. Yields the directory."""
  slug = repository().removeprefix("https://github.com/")
  committed = {f"/{slug}/main/{COMMITTED}/{name}": os.path.join(REPO, COMMITTED, name)
               for name in os.listdir(os.path.join(REPO, COMMITTED))}
  mirror = Mirror(data_dir, download.load_manifest(), committed)
  monkeypatch.setenv(download.MIRROR_ENV, mirror.url)
  monkeypatch.setenv("BERT_JAX_DATA_DIR", str(tmp_path / "data"))
  for name in ("no_proxy", "NO_PROXY"):  # the mirror is on 127.0.0.1
    monkeypatch.setenv(name, ",".join(filter(None, [os.environ.get(name), "127.0.0.1"])))
  if not os.environ.get(PIP_URL):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")])))
  cwd = tmp_path / "content"
  cwd.mkdir()
  yield cwd
  mirror.stop()


def run_notebook(name: str, cwd) -> str:
  """Executes notebooks/NAME.ipynb in `cwd`; returns the text its code cells printed, after
  checking where its install cell found bert_jax."""
  notebook = nbformat.read(os.path.join(REPO, "notebooks", name + ".ipynb"), as_version=4)
  NotebookClient(notebook, timeout=600, kernel_name=os.environ.get(KERNEL, "python3"),
                 resources={"metadata": {"path": str(cwd)}}).execute()
  outputs = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                    for out in cell.get("outputs", []))
  package = outputs.split("bert_jax from ")[1].split()[0]
  if os.environ.get(PIP_URL):  # installed by the cell, not the source tree
    assert "site-packages" in package and not package.startswith(REPO), package
  else:
    assert package == os.path.join(REPO, "bert_jax"), package
  return outputs


@pytest.mark.slow
def test_finetune_glue_notebook_runs_and_learns(minilm_dir, colab, monkeypatch, tmp_path):
  del minilm_dir  # the notebook finds the weights itself; this skips without them
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_EXAMPLES", "1280")  # 40 steps, about a minute
  # The kernel trains all-MiniLM-L6-v2 (L6/H384): with LLVM optimisation on (not the suite's
  # tiny-model default, tests/conftest.py) it runs in 153 s instead of 181 s. (The notebook
  # rounds packed rows up to a multiple of 4: two train-step shapes, not six; 113 s alone
  # with an empty compilation cache, against 138 s.)
  monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_RUNS", str(tmp_path))
  outputs = run_notebook("finetune_glue", colab)
  accuracy = float(outputs.split("dev accuracy ")[1].split()[0])
  print(f"notebook: SST-2 dev accuracy after 40 steps on 1,280 sentences: {accuracy:.4f}")
  assert accuracy > 0.7  # all-MiniLM-L6-v2 learns SST-2 well above chance even this briefly
  assert "P(positive)" in outputs
  assert os.path.isfile(tmp_path / "notebook_sst2_1280" / "learning_curve.png")


@pytest.mark.slow
def test_pretrain_tiny_notebook_runs_and_learns(colab, monkeypatch, tmp_path):
  # 40 steps (the default is 1,500): MLM loss 10.35 -> 6.76, 189 s of the notebook's
  # 214 s on 2 shared cores (60 steps: 248 s of 277 s).
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_STEPS", "40")
  # 4 of ~25 held-out batches per evaluation (3 of them): the evaluations took as long as
  # the 60 steps, and no assertion reads their values.
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_EVAL_BATCHES", "4")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_SOURCES", "wikitext-2/valid.txt,"
                     "nltk_corpora/state_union.zip,nltk_corpora/inaugural.zip")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_RUNS", str(tmp_path))
  # 40 steps of 32 x 128 tokens are compute, not compiling: with LLVM optimisation on the
  # training cell took 55 s alone instead of 79 s (the notebook 74 s instead of 101 s).
  monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
  outputs = run_notebook("pretrain_tiny", colab)
  # The masking statistics of the inspect cell.
  selected = float(outputs.split("selected_fraction")[1].split()[0])
  assert abs(selected - 0.15) < 0.01
  assert "[MASK:" in outputs
  # 40 steps take the MLM loss well below ln(vocab) = 10.33.
  first, last = map(float, re.search(r"MLM loss ([\d.]+) \(step \d+\) -> ([\d.]+)",
                                     outputs).groups())
  assert first > 9.5 and last < first - 2.0, (first, last)
  assert os.path.isfile(tmp_path / "notebook_tiny_40" / "pretraining_curves.png")
  assert outputs.count("[MASK] 1:") == 2 and "[MASK] 2:" in outputs


@pytest.mark.slow
def test_what_bert_learns_notebook_finds_positional_heads(minilm_dir, colab, monkeypatch,
                                                           tmp_path):
  del minilm_dir  # the notebook finds the weights itself; this skips without them
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_SEGMENTS", "8")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_TREEBANK_SENTENCES", "100")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_RUNS", str(tmp_path))
  outputs = run_notebook("what_bert_learns", colab)

  def best(statistic, which):
    line = next(line for line in outputs.splitlines() if line.strip().startswith(statistic))
    part = line.split(f"{which}: max ")[1]
    return float(part.split()[0])

  # all-MiniLM-L6-v2 has a previous-token head (0.98 of its attention on 64 segments) and a
  # next-token head (0.66); random weights spread attention about uniformly (~0.01).
  assert best("previous token", "pretrained") > 0.9
  assert best("next token", "pretrained") > 0.5
  assert best("previous token", "random init") < 0.1
  # The syntax probe on 100 treebank sentences: all-MiniLM-L6-v2's best determiner and
  # object heads are well above the best fixed offset and above every random-init head.
  for name in ("det", "dobj", "pobj"):
    best, random_best, offset = map(float, re.search(
        rf"{name}: best head ([\d.]+), random init ([\d.]+), best offset ([\d.]+)",
        outputs).groups())
    assert best > offset + 0.1 and best > random_best + 0.1, (name, best, random_best, offset)
  # The committed full-sample results: the two models pretrained here have no head above
  # the determiner offset baseline, MiniLM's best is 24 points above it.
  stored = dict(re.findall(r"^(.+?): det \d+-\d+ ([\d.]+) \(offset", outputs, re.M))
  assert set(stored) == {"all-MiniLM-L6-v2", "random init", "BERT-Tiny pretrained here",
                         "BERT-Mini pretrained here"}, stored
  assert float(stored["all-MiniLM-L6-v2"]) > 70 > float(stored["BERT-Mini pretrained here"])
  for name in ("attention_heads.png", "attention_maps.png", "syntax_heads.png",
               "syntax_heads_stored.png"):
    assert os.path.isfile(tmp_path / "what_bert_learns" / name)


@pytest.mark.slow
def test_masking_strategies_notebook_shows_each_selector(colab, monkeypatch, tmp_path):
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_BATCHES", "10")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_RUNS", str(tmp_path))
  outputs = run_notebook("masking_strategies", colab)
  stats = {}
  for name, selected, partial, drawn in re.findall(
      r"(\w+): selected ([\d.]+), partly-masked words ([\d.]+), first-unit length mean "
      r"([\d.]+)", outputs):
    stats[name] = (float(selected), float(partial), float(drawn))
  assert set(stats) == {"token", "whole_word", "ngram", "span"}
  for selected, _, _ in stats.values():
    assert abs(selected - 0.15) < 0.02
  assert stats["token"][1] > 0.02 and stats["whole_word"][1] == 0.0
  assert stats["token"][2] == 1.0 and 1.3 < stats["ngram"][2] < 2.0
  assert 2.8 < stats["span"][2] < 4.8  # geometric(0.2) clipped at 10: 3.78
  assert outputs.count("--- ") == 4 and "[MASK:" in outputs
  assert os.path.isfile(tmp_path / "notebook_masking" / "masking_strategies.png")


@pytest.mark.slow
def test_the_family_notebook_compares_bert_and_albert(colab, monkeypatch, tmp_path):
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_STEPS", "10")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_RUNLOCAL", "1")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_SOURCES", "nltk_corpora/inaugural.zip")
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_RUNS", str(tmp_path))
  outputs = run_notebook("the_family", colab)
  table = {}
  for line in outputs.splitlines():  # the side-by-side table, in markdown
    cells = line.strip("| ").split(" | ")
    if line.startswith("| ") and cells[0] != "variant":
      table[cells[0].split()[0]] = cells
  assert set(table) == {"BERT", "ALBERT"}
  params = {name: int(cells[1].replace(",", "")) for name, cells in table.items()}
  # BERT-Tiny's encoder (30522 x 128 embeddings, 2 layers, pooler) is 4,385,920 parameters;
  # ALBERT's: E=64 tables 1,986,432 + E->H 8,320 + one shared layer 198,272 + pooler 16,512.
  assert params == {"BERT": 4_385_920, "ALBERT": 2_209_536}
  for name, family in (("BERT", "bert"), ("ALBERT", "albert")):
    # The table's FLOPs per step are the run report's (same bert_jax.core.flops formula).
    with open(tmp_path / f"notebook_family_{family}_10" / "run_report.json") as f:
      [invocation] = json.load(f)["invocations"]
    assert float(table[name][3]) == pytest.approx(invocation["model_flops"] / 10, rel=1e-3)
    assert 0.0 <= float(table[name][4]) <= 1.0  # eval_mlm_accuracy
  assert outputs.count("held-out MLM accuracy by step") == 2
  assert os.path.getsize(tmp_path / "notebook_family_10.png") > 1000
