"""Every command line reports an expected error as one line `<cli>: error: ...` (bert_jax/startup/cli.py).

Each program runs once, as a subprocess, on one bad input that fails before any heavy
work; two at a time, so the file takes well under a minute on 2 cores.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

import pytest
from absl import flags

from bert_jax.startup import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bad_runs(tmp: str) -> dict[str, tuple[list[str], dict[str, str]]]:
  """{case: (arguments after `python -m`, extra environment)}: each fails on a bad input."""
  missing = os.path.join(tmp, "missing.txt")
  not_a_model = os.path.join(tmp, "not_a_model")
  os.makedirs(not_a_model, exist_ok=True)
  with open(os.path.join(not_a_model, "notes.txt"), "w") as f:
    f.write("no weights here\n")
  tiny_missing_corpus = f"--config=configs/tiny.py:corpus={missing},runlocal=True"
  bad_treebank = os.path.join(tmp, "bad.dp")
  with open(bad_treebank, "w") as f:
    f.write("The\tDT\t2\ndog\tNN\n")
  return {
      "bert_jax.train": (["bert_jax.train", tiny_missing_corpus,
                          f"--workdir={os.path.join(tmp, 'workdir')}"], {}),
      "bert_jax.commands.fill_mask": (["bert_jax.commands.fill_mask", f"--model={os.path.join(tmp, 'nowhere')}",
                              "a [MASK] here"], {}),
      "bert_jax.commands.embed": (["bert_jax.commands.embed", f"--model={not_a_model}", f"--input={missing}",
                          f"--output={os.path.join(tmp, 'out.npy')}"], {}),
      "bert_jax.commands.convert": (["bert_jax.commands.convert", f"--input={not_a_model}",
                            f"--output={os.path.join(tmp, 'converted')}"], {}),
      "bert_jax.text.prepare": (["bert_jax.text.prepare", f"--source={missing}",
                                 f"--output={os.path.join(tmp, 'corpus.txt')}"], {}),
      "bert_jax.text.learn_vocab": (["bert_jax.text.learn_vocab", f"--input={missing}",
                                     f"--output={os.path.join(tmp, 'vocab.txt')}"], {}),
      "bert_jax.pretrain.inspect": (["bert_jax.pretrain.inspect", tiny_missing_corpus], {}),
      "bert_jax.probe.syntax_heads": (["bert_jax.probe.syntax_heads", f"--model={not_a_model}",
                                       f"--treebank={bad_treebank}"], {}),
      # Bad flags fail while absl parses them, before main: one line too.
      "bert_jax.train: override typo": (
          ["bert_jax.train", "--config=configs/tiny.py", "--config.optim.learning_rat=1e-3",
           f"--workdir={os.path.join(tmp, 'workdir')}"], {}),
      "bert_jax.train: config arg typo": (
          ["bert_jax.train", "--config=configs/tiny.py:runlocl=True",
           f"--workdir={os.path.join(tmp, 'workdir')}"], {}),
      "bert_jax.train: unknown config name": (
          ["bert_jax.train", "--config=glu:dataset=sst2",
           f"--workdir={os.path.join(tmp, 'workdir')}"], {}),
      "traceback: BERT_JAX_TRACEBACK=1": (
          ["bert_jax.text.prepare", f"--source={missing}",
           f"--output={os.path.join(tmp, 'corpus.txt')}"], {cli.TRACEBACK_ENV: "1"}),
  }


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
  tmp = str(tmp_path_factory.mktemp("cli_errors"))
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "JAX_PLATFORMS": "cpu"}
  env.pop(cli.TRACEBACK_ENV, None)
  runs = bad_runs(tmp)

  def run(case):
    arguments, extra_env = runs[case]
    return subprocess.run([sys.executable, "-m", *arguments], cwd=REPO, capture_output=True,
                          text=True, env={**env, **extra_env}, timeout=120)

  with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    return dict(zip(runs, pool.map(run, runs)))


def last_line(text: str) -> str:
  return [line for line in text.splitlines() if line.strip()][-1]


@pytest.mark.slow
@pytest.mark.parametrize("program, message", [
    ("bert_jax.train", "file pattern '.*missing.txt' .* matches no file"),
    ("bert_jax.commands.fill_mask", "nowhere: no such file or folder"),
    ("bert_jax.commands.embed", "--input: .*missing.txt not found"),
    ("bert_jax.commands.convert", "not_a_model: not an HF folder"),
    ("bert_jax.text.prepare", "source '.*missing.txt' not found"),
    ("bert_jax.text.learn_vocab", "input file\\(s\\) not found: .*missing.txt"),
    ("bert_jax.pretrain.inspect", "file pattern '.*missing.txt' .* matches no file"),
    ("bert_jax.probe.syntax_heads", "bad.dp:2: expected 3 tab-separated columns"),
    ("bert_jax.train: override typo", "a --config override names no config field "
     "'learning_rat' \\(Did you mean \"learning_rate\""),
    ("bert_jax.train: config arg typo", "flag --config=configs/tiny.py:runlocl=True: "
     "ValueError: config arg 'runlocl': expected one of"),
    ("bert_jax.train: unknown config name", "flag --config=glu:dataset=sst2: no shipped "
     "config named 'glu': use one of albert, base, .*, tiny, or a path to a .py config file$"),
])
def test_expected_error_is_one_line(results, program, message):
  result = results[program]
  assert result.returncode == 1, result.stderr
  assert "Traceback" not in result.stderr, result.stderr
  line = last_line(result.stderr)
  assert line.startswith(f"{program.split(':')[0]}: error: "), result.stderr
  assert re.search(message, line), line


def test_traceback_on_request(results):
  result = results["traceback: BERT_JAX_TRACEBACK=1"]
  assert result.returncode == 1
  assert "Traceback (most recent call last)" in result.stderr, result.stderr
  assert ": error: " not in result.stderr


# ------------------------------------------------------------------ the helper itself
def test_multi_line_message_is_prefixed_once(capsys, monkeypatch):
  monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)

  def main(argv):
    raise ValueError("first line\nsecond line")

  with pytest.raises(SystemExit) as exit_info:
    cli.one_line_errors(main)([])
  assert exit_info.value.code == 1
  stderr = capsys.readouterr().err
  assert stderr == f"{cli.program_name()}: error: first line\nsecond line\n"


@pytest.mark.parametrize("error", [KeyError("bug"), TypeError("bug"), AttributeError("bug")])
def test_unexpected_errors_keep_their_traceback(error, monkeypatch):
  monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)

  def main(argv):
    raise error

  with pytest.raises(type(error)):
    cli.one_line_errors(main)([])


def test_traceback_env_reraises(monkeypatch):
  monkeypatch.setenv(cli.TRACEBACK_ENV, "1")

  def main(argv):
    raise FileNotFoundError("gone.txt")

  with pytest.raises(FileNotFoundError):
    cli.one_line_errors(main)([])


def test_verbose_flag_reraises(monkeypatch):
  """Where a program defines --verbose (train does), --verbose shows the traceback."""
  monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
  defined_here = "verbose" not in flags.FLAGS
  if defined_here:
    flags.DEFINE_bool("verbose", False, "test stand-in for train's --verbose")
  monkeypatch.setattr(flags.FLAGS["verbose"], "value", True)

  def main(argv):
    raise FloatingPointError("loss is nan")

  try:
    with pytest.raises(FloatingPointError):
      cli.one_line_errors(main)([])
  finally:
    if defined_here:
      delattr(flags.FLAGS, "verbose")
