"""The commands the docs show still run as written: a renamed flag, config argument or
config field breaks this test, not a reader's first try.

Every command in README.md, CONTRIBUTING.md and docs/ (fenced and indented code blocks,
and inline code that starts a program or holds a `--config=`), and in the docstrings of
configs/*.py (the command each config shows with its result), that runs one of the
package's programs, a bench/ or an experiments/ script: each `--flag` must be one the
program defines (absl's DEFINE_*, argparse's add_argument, absl's own flags), and a
`--config=FILE_OR_NAME[:args]` with its `--config.a.b=value` overrides is parsed exactly
as the program parses it (ml_collections' config flag, locked: an unknown field or
argument fails). Values that are placeholders (PATH, <...>, ...) are not checked.
"""
import ast
import functools
import glob
import os
import re
import shlex

import pytest
from absl import flags

from bert_jax.startup import config_flag
from tests.helpers.runs import REPO

DOCS = ["README.md", "CONTRIBUTING.md", *sorted(
    os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "**", "*.md"),
                                                recursive=True))]
GENERATED = {"docs/reference/configs.md"}  # generated from the configs: nothing to check
# Flags every absl program takes (absl.app, absl.logging) besides its own.
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok",
              "verbosity", "v", "logtostderr", "alsologtostderr", "log_dir", "stderrthreshold",
              "showprefixforinfo", "only_check_args", "pdb", "pdb_post_mortem",
              "run_with_profiling", "profile_file", "use_cprofile_for_profiling",
              "logger_levels", "verbose"}
PROGRAM = re.compile(r"(?:^|\s)(?:python3? -m ((?:bert_jax|experiments|bench)[\w.]*)|(bert-jax-[\w-]+)|python3? "
                     r"((?:bench|experiments|docs)/[\w/]+\.py))(?=\s|$)")
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|\b[A-Z][A-Z0-9_]{2,}\b|\{|\[")  # PATH, <you>, [...]


def _code_of(text: str) -> list[tuple[int, str]]:
  """(line number, command text) of the page's fenced and indented code and inline code."""
  found, fence, lines = [], None, text.split("\n")
  for number, line in enumerate(lines, 1):
    if line.lstrip().startswith("```"):
      fence = None if fence is not None else line.strip()[3:]
      continue
    if fence is not None:
      if fence in ("", "bash", "sh", "console", "shell"):
        found.append((number, line))
    elif line.startswith("    ") and line.strip():
      found.append((number, line))
    else:
      found += [(number, span) for span in re.findall(r"`([^`]+)`", line)
                if PROGRAM.search(" " + span) or "--config=" in span]
  # a trailing backslash continues the command on the next line
  joined, carry = [], None
  for number, piece in found:
    if carry is not None:
      carry = (carry[0], carry[1][:-1] + " " + piece.strip())
    else:
      carry = (number, piece)
    if not carry[1].rstrip().endswith("\\"):
      joined.append(carry)
      carry = None
  return joined


def _commands(text: str):
  """(line, program or None, args) of each command in text; program None: a bare
  `--config=...` fragment."""
  for number, line in _code_of(text):
    line = line.strip().removeprefix("$ ")
    for part in re.split(r"&&|\|\||;|\|", line):
      try:
        words = shlex.split(part, comments=True)
      except ValueError:
        continue  # an unbalanced quote: prose, not a command
      match = PROGRAM.search(" " + " ".join(words))
      if match:
        program = match[1] or match[2] or match[3]
        start = next(i for i, w in enumerate(words) if w in (program, "-m")
                     or w.endswith(program))
        args = [w for w in words[start + 1:] if w != program]
        yield number, program, args
      elif any(w.startswith("--config=") for w in words):
        yield number, None, [w for w in words if w.startswith("--config")]


def _module_file(program: str) -> str | None:
  """The source file a program runs (python -m M, bert-jax-X, a script path)."""
  from bert_jax.commands.console import PROGRAMS
  module = PROGRAMS.get(program, program)
  if module.endswith(".py"):
    return os.path.join(REPO, module)
  for candidate in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__main__.py"):
    if os.path.isfile(os.path.join(REPO, candidate)):
      return os.path.join(REPO, candidate)
  return None


@functools.cache
def _flags_of(path: str) -> frozenset:
  """The flags a program's file defines (absl or argparse), and `config` where it takes one;
  a script also takes those of a script beside it that it imports (bench/train_step.py's
  shared flags)."""
  with open(path) as f:
    source = f.read()
  names = set(re.findall(r"DEFINE_\w+\(\s*[\"'](\w+)[\"']", source))
  for imported in re.findall(r"^(?:import|from) (\w+)", source, re.M):
    beside = os.path.join(os.path.dirname(path), imported + ".py")
    if os.path.isfile(beside) and os.path.abspath(beside) != os.path.abspath(path):
      names |= _flags_of(beside)
  names |= set(re.findall(r"add_argument\(\s*[\"']--([\w-]+)[\"']", source))
  names |= set(re.findall(r"define_config\(\s*[\"'](\w+)[\"']", source))
  if "from absl" in source or "import absl" in source:
    names |= ABSL_FLAGS
  return frozenset(names)


def _check_config(args: list[str]) -> None:
  """--config=... and its overrides, parsed as the programs parse them."""
  config_args = [a for a in args if a.startswith("--config")]
  spec = next(a for a in config_args if a.startswith("--config="))[len("--config="):]
  if PLACEHOLDER.search(spec):
    return
  checked = [f"--config={spec}"] + [a for a in config_args if a.startswith("--config.")
                                     and "=" in a and not PLACEHOLDER.search(a.split("=", 1)[1])]
  argv = ["program", *checked]
  values = flags.FlagValues()
  config_flag.define_config("config", "", flag_values=values, sys_argv=argv)
  cwd = os.getcwd()
  os.chdir(REPO)  # the docs' paths are the repository's
  try:
    values(argv)
    values.config  # noqa: B018 - the config file is loaded and the overrides applied here
  finally:
    os.chdir(cwd)


def _as_code_block(docstring: str) -> str:
  """A config's docstring as one code block: its commands are indented lines, and
  `inline code` in its prose is read as code too."""
  return "```\n" + docstring.replace("`", " ") + "\n```\n"


def _cases():
  configs = sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "configs",
                                                                           "*.py")))
  for doc in DOCS + configs:
    if doc in GENERATED:
      continue
    with open(os.path.join(REPO, doc)) as f:
      text = f.read()
    if doc.endswith(".py"):
      text = _as_code_block(ast.get_docstring(ast.parse(text), clean=False) or "")
    for number, program, args in _commands(text):
      yield pytest.param(program, args, id=f"{doc}:{number}")


CASES = list(_cases())


def test_the_docs_show_commands():
  assert len(CASES) > 50, len(CASES)  # the extraction finds the docs' commands


@pytest.mark.parametrize("program, args", CASES)
def test_each_command_names_real_flags_and_config_fields(program, args):
  if program is not None:
    path = _module_file(program)
    assert path is not None, f"{program}: no such module or script"
    known = _flags_of(path)
    for arg in args:
      if not arg.startswith("--") or arg.startswith("--config."):
        continue
      name = arg[2:].split("=", 1)[0]
      if name not in known and not (name.startswith("no") and name[2:] in known):
        raise AssertionError(f"{program}: no flag --{name} (it has "
                             f"{', '.join(sorted(known - ABSL_FLAGS))})")
  if any(a.startswith("--config=") for a in args):
    _check_config(args)


def test_a_renamed_flag_or_field_is_caught():
  text = ("```bash\npython -m bert_jax.train --config=configs/glue.py:dataset=sst2 \\\n"
          "    --config.optim.no_such_field=1 --workdir=x\n"
          "python -m bert_jax.commands.fill_mask --modell=runs/x\n```\n")
  (_, train, train_args), (_, fill, fill_args) = list(_commands(text))
  assert (train, fill) == ("bert_jax.train", "bert_jax.commands.fill_mask")
  with pytest.raises(Exception, match="no_such_field"):
    test_each_command_names_real_flags_and_config_fields(train, train_args)
  with pytest.raises(AssertionError, match="--modell"):
    test_each_command_names_real_flags_and_config_fields(fill, fill_args)
  with pytest.raises(Exception, match="task"):
    _check_config(["--config=configs/glue.py:task=sst2"])


def test_docstrings_keep_their_line_continuations():
  """A command in a module docstring continued with a backslash reads as two lines in
  `--help` and the API pages only when the docstring is raw (r\"\"\"...): in a plain one
  the backslash and the newline vanish and the lines run together."""
  bad = []
  for pattern in ("bert_jax/**/*.py", "configs/*.py", "bench/*.py", "experiments/*.py"):
    for path in sorted(glob.glob(os.path.join(REPO, pattern), recursive=True)):
      with open(path) as f:
        source = f.read()
      body = ast.parse(source).body
      if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        text = ast.get_source_segment(source, body[0])
        if "\\\n" in text and not text.startswith(("r'", 'r"')):
          bad.append(os.path.relpath(path, REPO))
  assert not bad, f"docstrings with a backslash continuation that are not raw: {bad}"
