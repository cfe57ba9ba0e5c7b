"""Start-up quiet: no TensorFlow / XLA C++ start-up lines, no dependencies' warnings.

TensorFlow is the input pipeline here (tf.data, in-graph tokenisation) and never needs a
GPU; JAX owns the accelerators. Imported on a CPU machine, TensorFlow's shared libraries
print C++ log lines before absl's logging is set up, which TF_CPP_MIN_LOG_LEVEL does not
reach (`WARNING: All log messages before absl::InitializeLog() ...`, `I0000 ...
cudart_stub.cc ... Could not find cuda drivers`), and listing its GPUs prints `E0000 ...
cuda_platform.cc ... failed call to cuInit` where there is no driver: an `E` line a reader
takes for a failure. `install()` (run by `import bert_jax`) therefore:

  - sets TF_CPP_MIN_LOG_LEVEL=2 unless the environment sets it (TensorFlow's later INFO and
    WARNING lines off);
  - on the first `import tensorflow`, runs that import and the hiding of TensorFlow's GPUs
    (`tf.config.set_visible_devices([], "GPU")`) with file descriptor 2 passed through a
    filter that drops exactly those start-up lines (`is_startup_noise`) and passes every
    other byte through as it comes, so a real error, or a crash, still shows;
  - ignores the DeprecationWarning / FutureWarning family of warnings raised by other
    packages (bert_jax's own warnings still show);
  - drops the libraries' log records of an error that they then raise to bert_jax, which
    ends the program with it in one line (`REPEATED_ERRORS`: gcsfs's "out of retries",
    with a traceback per request, and orbax's failed background save, when a bucket goes
    out of reach), and the "coroutine ... was never awaited" warnings of that save's cut
    coroutines at exit.

JAX is untouched: it still finds a GPU or TPU where there is one. Everything comes back
with `--verbose` on the command line or BERT_JAX_VERBOSE=1 in the environment.
"""
import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys
import threading
import warnings

VERBOSE_ENV = "BERT_JAX_VERBOSE"

_STARTUP_NOISE = re.compile(
    r"^(?:[IW]\d{4} \S+ +\d+ \S+\] |"  # absl-format INFO / WARNING lines
    r"WARNING: All log messages before absl::InitializeLog\(\) is called|"
    r"E\d{4} \S+ +\d+ cuda_\w+\.cc:\d+\] failed call to cuInit)")  # no GPU driver


# Logger -> the source files (their path's end) whose ERROR records with a traceback repeat
# an exception that is then raised to the caller: gcsfs logs each request out of retries
# (retry.py) before raising it; orbax's background save (absl logging) logs the failure of
# its thread, of each of its signalling threads and of its metadata write, and raises it
# when the trainer waits for the save.
_ORBAX = "orbax/checkpoint/_src/"
REPEATED_ERRORS = {"gcsfs": ("gcsfs/retry.py",),
                   "absl": (_ORBAX + "checkpointers/async_checkpointer.py",
                            _ORBAX + "futures/future.py", _ORBAX + "metadata/checkpoint.py")}


class _DropRepeatedErrors(logging.Filter):
  """Drops a logger's records of REPEATED_ERRORS (ERROR, with exc_info, from its file)."""

  def __init__(self, sources: tuple[str, ...]):
    super().__init__()
    self.sources = sources

  def filter(self, record: logging.LogRecord) -> bool:
    repeated = (record.levelno >= logging.ERROR and record.exc_info is not None
                and record.pathname.replace(os.sep, "/").endswith(self.sources))
    return not repeated


def drop_repeated_errors() -> None:
  """REPEATED_ERRORS' filters on their loggers (once)."""
  from absl import logging as absl_logging  # its logger is made first, as absl's own class
  del absl_logging
  for name, sources in REPEATED_ERRORS.items():
    logger = logging.getLogger(name)
    if not any(isinstance(f, _DropRepeatedErrors) for f in logger.filters):
      logger.addFilter(_DropRepeatedErrors(sources))


def is_startup_noise(line: str) -> bool:
  """True for the C++ start-up lines that `install` hides (module docstring)."""
  return bool(_STARTUP_NOISE.match(line))


def verbose() -> bool:
  """--verbose (any spelling that sets it) on the command line, or BERT_JAX_VERBOSE=1."""
  if os.environ.get(VERBOSE_ENV, "") not in ("", "0"):
    return True
  return any(arg in ("--verbose", "--verbose=true", "--verbose=True", "--verbose=1")
             for arg in sys.argv[1:])


@contextlib.contextmanager
def filtered_stderr():
  """File descriptor 2 through `is_startup_noise`: other lines pass, each as it comes."""
  sys.stderr.flush()
  real = os.dup(2)
  read_end, write_end = os.pipe()
  os.dup2(write_end, 2)
  os.close(write_end)

  def pump():
    with os.fdopen(read_end, "rb") as pipe:
      for line in pipe:
        if not is_startup_noise(line.decode("utf-8", "replace")):
          os.write(real, line)

  thread = threading.Thread(target=pump, name="bert_jax-stderr-filter", daemon=True)
  thread.start()
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(real, 2)  # closes the pipe's last writer: the pump reads to the end and stops
    thread.join(timeout=10)
    os.close(real)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` as usual, with a loader that runs it under `filtered_stderr`."""

  def find_spec(self, name, path, target=None):
    if name != "tensorflow" or path is not None:
      return None
    # The path finder locates the package; this finder stays first in line until the
    # import itself (a find_spec without an import, as a library's "is TensorFlow
    # installed?" check, must not use it up), and TensorFlow is then in sys.modules.
    spec = importlib.machinery.PathFinder.find_spec(name)
    if spec is None or spec.loader is None:
      return spec
    exec_module = spec.loader.exec_module

    def quiet_exec_module(module):
      with filtered_stderr():
        exec_module(module)
        try:
          module.config.set_visible_devices([], "GPU")  # tf.data only: GPUs belong to JAX
        except RuntimeError:  # the runtime was already initialised: leave it as it is
          pass

    spec.loader.exec_module = quiet_exec_module
    return spec


def install() -> None:
  """The start-up quiet of the module docstring; nothing when verbose or when TensorFlow is
  already imported."""
  if verbose():
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
    warnings.filterwarnings("ignore", category=category, module=r"(?!bert_jax)")
  # The coroutines of a save that a failed bucket cut short, reported at exit after the
  # program's one-line error (bert_jax has no coroutines of its own).
  warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
  drop_repeated_errors()
  if "tensorflow" not in sys.modules and not any(
      isinstance(finder, _QuietTensorFlowImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _QuietTensorFlowImport())
