"""Every command prints progress, results and one-line errors only (bert_jax/startup/quiet.py).

Each program runs its cheapest real path once, as a subprocess, with the environment a
user has (no TF_CPP_MIN_LOG_LEVEL, no JAX_PLATFORMS); its output must hold no absl-format
C++ log line (`^[IWEF]dddd `), no `All log messages before absl::InitializeLog()` and no
Python warning. The same TensorFlow import with --verbose shows those lines on a machine
without a GPU driver, so the check is not vacuous there. The main job's programs that are
not run here (learn_vocab, word_vectors, fill_mask) are checked the same way by CI's
fresh-machine step (`.ci/run` greps this file's NOISE pattern in the output of
`QUICK=1 scripts/main_job.sh`, run in a clean virtual environment).
"""
import concurrent.futures
import os
import re
import subprocess
import sys

import pytest

from bert_jax.startup import quiet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOISE = re.compile(r"^[IWEF][0-9]{4} |All log messages before absl|Warning: |warnings\.warn")


def _env():
  """A user's environment: without the test suite's settings, the target compilers' folder
  (tests/conftest.py) and the TPU_* variables libtpu sets in a process that compiled for a
  TPU (tests/test_targets.py, when it ran in this worker first)."""
  return {k: v for k, v in os.environ.items()
          if k not in ("TF_CPP_MIN_LOG_LEVEL", "JAX_PLATFORMS", quiet.VERBOSE_ENV,
                       "BERT_JAX_TARGETS_SITE") and not k.startswith("TPU_")}


def _run(arguments, timeout=300):
  return subprocess.run([sys.executable, "-m", *arguments], cwd=REPO, capture_output=True,
                        text=True, env=_env(), timeout=timeout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir, minilm_dir):
  tmp = tmp_path_factory.mktemp("quiet")
  corpus, sentences = str(tmp / "corpus.txt"), str(tmp / "sentences.txt")
  with open(sentences, "w") as f:
    f.write("the cat sat on the mat .\na dog barked .\n")
  results = {"bert_jax.text.prepare": _run(
      ["bert_jax.text.prepare", "--source=wikitext-2/valid.txt", f"--output={corpus}"])}
  tiny = f"--config=configs/tiny.py:corpus={corpus},runlocal=True"
  cases = {
      "bert_jax.train": ["bert_jax.train", tiny, "--config.num_train_steps=2",
                         "--config.eval_every_steps=2", "--config.eval_batches=1",
                         f"--workdir={tmp / 'tiny'}"],
      "bert_jax.pretrain.inspect": ["bert_jax.pretrain.inspect", tiny, "--batches=1",
                                    "--examples=1"],
      "bert_jax.commands.embed": ["bert_jax.commands.embed", f"--model={minilm_dir}", f"--input={sentences}",
                         f"--output={tmp / 'embeddings.npy'}"],
      "bert_jax.commands.convert": ["bert_jax.commands.convert", f"--input={minilm_dir}",
                           f"--output={tmp / 'native'}"],
      "verbose": ["bert_jax.pretrain.inspect", tiny, "--batches=1", "--examples=1",
                  "--verbose"],
  }
  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    results.update(zip(cases, pool.map(_run, cases.values())))
  return results


@pytest.mark.slow
@pytest.mark.parametrize("program", [
    "bert_jax.text.prepare", "bert_jax.train", "bert_jax.pretrain.inspect", "bert_jax.commands.embed",
    "bert_jax.commands.convert"])
@pytest.mark.slow
def test_command_prints_no_startup_lines(runs, program):
  result = runs[program]
  assert result.returncode == 0, result.stderr[-3000:]
  noise = [line for line in (result.stdout + result.stderr).splitlines() if NOISE.search(line)]
  assert noise == [], "\n".join(noise)


@pytest.mark.slow
def test_verbose_brings_the_lines_back(runs):
  result = runs["verbose"]
  assert result.returncode == 0, result.stderr[-3000:]
  if os.path.exists("/dev/nvidiactl"):
    pytest.skip("a GPU driver is present: TensorFlow prints no missing-driver lines")
  assert any(quiet.is_startup_noise(line) for line in result.stderr.splitlines()), result.stderr


@pytest.mark.parametrize("line, noise", [
    ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
     True),
    ("I0000 00:00:1795852777.257581   11091 cudart_stub.cc:31] Could not find cuda drivers on "
     "your machine, GPU will not be used.", True),
    ("E0000 00:00:1795852789.202843   11091 cuda_platform.cc:52] failed call to cuInit: "
     "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)", True),
    ("E0000 00:00:1795852789.202843   11091 gpu_compiler.cc:12] out of memory", False),
    ("F0000 00:00:1795852789.202843   11091 tensor.cc:9] Check failed", False),
    ("bert_jax.train: error: config.data.corpus: no such file", False),
])
def test_only_startup_lines_are_hidden(line, noise):
  assert quiet.is_startup_noise(line) == noise


def test_the_filter_passes_other_lines_through():
  code = ("import os, sys\nfrom bert_jax.startup import quiet\nwith quiet.filtered_stderr():\n"
          "  os.write(2, b'I0000 00:00:1.2   7 cudart_stub.cc:31] hidden\\n')\n"
          "  os.write(2, b'kept line\\n')\n  print('python line', file=sys.stderr)\n"
          "print('after', file=sys.stderr)\n")
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, env=_env(), timeout=120)
  assert result.stderr.splitlines() == ["kept line", "python line", "after"], result.stderr



def test_a_library_error_that_is_raised_on_is_not_logged_as_well():
  """gcsfs's "out of retries" record (ERROR, with its traceback, from gcsfs/retry.py) is
  dropped, as is orbax's failed background save; the same logger's other records pass."""
  import logging
  quiet.drop_repeated_errors()

  def shown(logger, path, level=logging.ERROR, exc_info=True):
    try:
      raise ConnectionError("refused")
    except ConnectionError:
      record = logging.getLogger(logger).makeRecord(
          logger, level, path, 185, "_request out of retries on exception: refused", (),
          sys.exc_info() if exc_info else None)
    return logging.getLogger(logger).filter(record)

  site = os.path.join("site-packages", "gcsfs", "retry.py")
  orbax = os.path.join("orbax", "checkpoint", "_src", "checkpointers", "async_checkpointer.py")
  signals = os.path.join("orbax", "checkpoint", "_src", "futures", "future.py")
  assert not shown("gcsfs", site) and not shown("absl", orbax) and not shown("absl", signals)
  assert shown("gcsfs", site, exc_info=False) and shown("gcsfs", site, logging.WARNING)
  assert shown("gcsfs", os.path.join("gcsfs", "core.py")) and shown("absl", "train.py")


def test_ci_checks_the_main_job_with_this_pattern():
  """.ci/run's fresh-machine step greps the same pattern (its copy must not drift)."""
  with open(os.path.join(REPO, ".ci", "run")) as f:
    ci = f.read()
  assert f"NOISE='{NOISE.pattern}'" in ci
