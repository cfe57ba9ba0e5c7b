"""How every command line ends on an error: one line, or a traceback when asked.

  if __name__ == "__main__":
    cli.run(main)          # instead of absl's app.run(main)

An expected error (bad data, config, checkpoint or weights: `ValueError` and its
subclasses such as `CorpusError`, `OSError` such as a missing file, `FloatingPointError`)
becomes `<program>: error: <message>` on stderr and exit code 1, with no traceback; so
does a bad flag or `--config` override (a config arg or field that does not exist, a value
that does not parse), which absl meets while parsing, before main.
`--verbose` (where the program has that flag) or the environment variable
`BERT_JAX_TRACEBACK=1` shows the traceback instead. Any other exception is a bug and
always shows its traceback.

A flag given a URL (gs://..., s3://...) is refused before main, in one line naming the
flag, the URL and the program, unless the program lists the flag in `run(main, urls=...)`
(the flags it reads or writes through `bert_jax.files.storage`: train's --workdir, prepare's
--source, --output and --data_dir, ...): a flag read on local disk only never makes a
folder named after a URL, nor resolves one under the data root.

This module imports nothing else from bert_jax but `storage` (the layer below): it is the
bottom layer of the programs, so every program, `text/` ones included, can use it.
"""
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from absl import app
from absl import flags
from absl import logging

from bert_jax.files import storage

EXPECTED_ERRORS = (ValueError, OSError, FloatingPointError)
TRACEBACK_ENV = "BERT_JAX_TRACEBACK"


def program_name() -> str:
  """`python -m bert_jax.text.prepare` -> "bert_jax.text.prepare"; a console script
  (`bert-jax-prepare`, bert_jax.commands.console) -> its name; else the script's name."""
  if os.path.basename(sys.argv[0]).startswith("bert-jax-"):
    return os.path.basename(sys.argv[0])
  spec = getattr(sys.modules.get("__main__"), "__spec__", None)
  if spec is not None and spec.name:
    return spec.name.removesuffix(".__main__")
  return os.path.basename(sys.argv[0])


def show_traceback() -> bool:
  """True with BERT_JAX_TRACEBACK=1 or, where the program defines it, --verbose."""
  if os.environ.get(TRACEBACK_ENV, "") not in ("", "0"):
    return True
  return "verbose" in flags.FLAGS and bool(flags.FLAGS["verbose"].value)


def error_line(error: BaseException) -> str:
  """`<program>: error: <message>`; a multi-line message keeps its lines."""
  return f"{program_name()}: error: {str(error) or type(error).__name__}"


def one_line_errors(main: Callable[[list[str]], Any]) -> Callable[[list[str]], Any]:
  """Wraps an absl main: expected errors exit 1 with `error_line`, unless tracebacks are on."""
  @functools.wraps(main)
  def wrapped(argv):
    try:
      return main(argv)
    except EXPECTED_ERRORS as error:
      if show_traceback():
        raise
      sys.stdout.flush()
      print(error_line(error), file=sys.stderr, flush=True)
      sys.exit(1)
  return wrapped


def flag_error_message(error: BaseException) -> str:
  """What a bad command-line flag's error says, in one line: the config file's own error
  (the last line of the traceback ml_collections puts in its message, after the flag), or
  the unknown field of a `--config.*` override with ml_collections' suggestion."""
  inner = error.args[0] if error.args and isinstance(error.args[0], BaseException) else None
  if isinstance(error, AttributeError) and isinstance(inner, KeyError) and inner.args:
    field, _, hint = str(inner.args[0]).partition("\n")
    return f"a --config override names no config field {field}" + (
        f" ({hint.strip()})" if hint.strip() else "")
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  if len(lines) > 1 and lines[0].startswith("flag "):  # "flag --config=...: Error whilst ..."
    return f"{lines[0].split(': ')[0]}: {lines[-1]}"
  return lines[-1] if lines else type(error).__name__


def _parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, a bad flag or config override ending as one line (unless
  tracebacks are on: BERT_JAX_TRACEBACK=1 or --verbose)."""
  try:
    return flags.FLAGS(argv)
  except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as error:
    if os.environ.get(TRACEBACK_ENV, "") not in ("", "0") or "--verbose" in argv:
      raise
    print(f"{program_name()}: error: {flag_error_message(error)}", file=sys.stderr,
          flush=True)
    sys.exit(1)


def refuse_url_flags(urls: tuple[str, ...] = ()) -> None:
  """A ValueError for the first flag given on the command line whose value is a URL,
  unless its name is in `urls` (the flags this program reads or writes through
  `bert_jax.files.storage`) or it overrides a config field (`--config.init_from=gs://...`:
  a config's paths may be URLs, each read where it is used)."""
  names = sorted(flags.FLAGS)
  overrides = {name for name in names if "." in name and name.split(".")[0] in names}
  for name in names:
    flag = flags.FLAGS[name]
    if not flag.present or name in urls or name in overrides:
      continue
    values = flag.value if isinstance(flag.value, (list, tuple)) else [flag.value]
    for value in values:
      if isinstance(value, str) and storage.is_url(value):
        raise ValueError(f"--{name}={value}: {program_name()} reads and writes local paths "
                         "there, a URL is not supported (copy the files to a local folder)")


def run(main: Callable[[list[str]], Any], urls: tuple[str, ...] = ()) -> None:
  """absl's `app.run(main)`, with expected errors (and bad flags) as one line (module
  docstring). Every program gets `--verbose` (tracebacks, INFO logs and the start-up lines
  that `bert_jax.startup.quiet` hides). `urls`: the flags that may be a URL (all others may not)."""
  if "verbose" not in flags.FLAGS:
    flags.DEFINE_bool("verbose", False, "Tracebacks, INFO logs and TensorFlow's / XLA's "
                      "start-up lines (bert_jax.startup.quiet), all of which are off by default.")

  def quiet_main(argv):
    quiet_logs()
    refuse_url_flags(urls)
    return main(argv)

  app.run(one_line_errors(functools.wraps(main)(quiet_main)), flags_parser=_parse_flags)


def quiet_logs() -> None:
  """INFO logs (orbax's per-file checkpoint chatter) off unless --verbosity or --verbose
  was given (`run` does it before main)."""
  if not flags.FLAGS["verbosity"].present and not (
      "verbose" in flags.FLAGS and flags.FLAGS["verbose"].value):
    logging.set_verbosity(logging.WARNING)
