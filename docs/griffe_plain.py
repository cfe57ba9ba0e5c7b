"""Griffe extension: bert_jax's plain-text docstrings turned into Markdown that reads as text.

The docstrings follow google-research/bert's habit, not a docstring style: prose, `name:
meaning` lines, indented code lines, aligned shape legends and `[CLS]`-style tokens. Each
block (lines between blank lines) becomes the Markdown that shows it as written:

- a fenced block (the examples, fenced as python) stays as it is;
- lines indented below the text, or two lines or more whose columns are aligned (three
  spaces inside a line), are code: a python block when they parse as Python, else text;
- `name: meaning` lines (and `- ` lines) are a list, one item per name, wrapped lines
  joined to their item;
- other lines are a paragraph, reflowed by the browser, with the characters Markdown would
  read as markup (brackets, angle brackets, stars, underscores, braces, hashes) escaped
  outside `code spans`.

A class with annotated class attributes (a dataclass's, a flax.struct dataclass's or a
Flax module's fields) also gets a table of them: name, type, default, and the meaning its
docstring gives under that name (the item then leaves the text, so it is said once).
"""
import ast
import re
import textwrap

import griffe

# `name: meaning`, `a / b: meaning` or `a, b: meaning` at the start of a line.
ITEM = re.compile(r"^`?(\*{0,2}[A-Za-z_][\w.]*(?:(?:\s*/\s*|,\s*)[A-Za-z_][\w.]*)*)`?:"
                  r"(?:\s+|$)(.*)")
# A list marker: "- ", "* ", "1. ".
MARKER = re.compile(r"^([-*]|\d+\.)\s+")
ALIGNED = re.compile(r"\S {3,}\S")
# Section headers whose items all move into the fields table (the header goes with them).
SECTIONS = ("Attributes:", "Fields:")
SPECIAL = re.compile(r"([\\*_\[\]{}#|<>])")


def escape(text):
  """Markdown-escapes text outside its `code spans`."""
  parts = re.split(r"(`[^`]+`)", text)
  return "".join(p if p.startswith("`") and p.endswith("`") and len(p) > 1 else
                 SPECIAL.sub(lambda m: "&lt;" if m[1] == "<" else "&gt;" if m[1] == ">"
                             else "\\" + m[1], p) for p in parts)


def indent_of(line):
  return len(line) - len(line.lstrip())


def code_block(lines):
  """The lines as a fenced code block: python when they parse as Python, else text."""
  text = textwrap.dedent("\n".join(lines))
  try:
    ast.parse(text)
    language = "python"
  except SyntaxError:
    language = "text"
  return f"```{language}\n{text}\n```"


def item_names(head):
  """The names an item line gives its meaning to ("a / b, c" -> [a, b, c])."""
  return [n.strip() for n in re.split(r"/|,", head)]


class Rendered:
  """Markdown parts of one docstring, and the items it gave, by name."""

  def __init__(self):
    self.parts = []
    self.items = []  # [(names, head, text, part index)]

  def paragraph(self, words):
    if words:
      self.parts.append(escape(" ".join(words)))

  def item(self, head, words, marker="-"):
    text = " ".join(words)
    names = item_names(head) if head else []
    self.items.append((names, head, text, len(self.parts)))
    marker = marker if marker[0].isdigit() else "-"
    self.parts.append(f"{marker} `{head}`: {escape(text)}" if head else
                      f"{marker} {escape(text)}")


def segments(lines):
  """(head line, deeper lines after it) pairs of a block, by the block's least indent."""
  base = min(indent_of(line) for line in lines)
  found = []
  for line in lines:
    if indent_of(line) > base and found:
      found[-1][1].append(line)
    else:
      found.append((line.strip(), []))
  return base, found


def render_block(lines, out, top=True):
  """Appends one block's Markdown to `out` (a Rendered)."""
  base, parts = segments(lines)
  listed = bool(ITEM.match(parts[0][0]) or MARKER.match(parts[0][0]))
  aligned = sum(bool(ALIGNED.search(line.strip())) for line in lines if indent_of(line) == base)
  if aligned >= 2 or ((base > 0 or not top) and not listed):
    out.parts.append(code_block(lines))
    return
  words, head, open_item, marker = [], None, False, "-"
  def flush():
    nonlocal words, open_item
    if open_item:
      out.item(head, words, marker)
    else:
      out.paragraph(words)
    words, open_item = [], False
  for line, deeper in parts:
    match = ITEM.match(line)
    bullet = MARKER.match(line)
    if match and not match[2] and deeper:  # a section header ("Attributes:", "Returns:")
      flush()
      out.paragraph([line])
      section(deeper, out)
    elif match or bullet:
      flush()
      head, open_item = (match[1], True) if match else (None, True)
      marker = bullet[1] if bullet and not match else "-"
      words = [match[2]] if match else [line[bullet.end():]]
      words += [d.strip() for d in deeper]
    elif deeper and line.endswith(":"):
      words.append(line)
      flush()
      render_block(deeper, out, top=False)
    elif deeper:
      words.append(line)
      flush()
      out.parts.append(code_block(deeper))
    elif open_item and words and words[-1].endswith(".") and line[:1].isupper():
      flush()  # a sentence after a list: a paragraph of its own
      words.append(line)
    else:
      words.append(line)
  flush()


def section(lines, out):
  """A section's indented lines: a list, code, or (neither: "Returns:" and a sentence)
  a paragraph."""
  _, parts = segments(lines)
  if ITEM.match(parts[0][0]) or MARKER.match(parts[0][0]) or any(
      ALIGNED.search(line.strip()) for line in lines):
    render_block(lines, out, top=False)
  else:
    out.paragraph([line.strip() for line in lines])


def blocks(text):
  """(kind, lines) of a docstring: "fence" blocks as written, "text" blocks between blank
  lines."""
  found, current, fence = [], [], None
  for line in text.splitlines():
    if fence is not None:
      fence.append(line)
      if line.strip().startswith("```"):
        found.append(("fence", fence))
        fence = None
    elif line.strip().startswith("```"):
      if current:
        found.append(("text", current))
      current, fence = [], [line]
    elif not line.strip():
      if current:
        found.append(("text", current))
      current = []
    else:
      current.append(line)
  if current:
    found.append(("text", current))
  if fence:
    found.append(("fence", fence))
  return found


def joined(parts):
  """The parts as one Markdown text; list items next to each other make one tight list."""
  text = ""
  for i, part in enumerate(parts):
    tight = i and MARKER.match(part) and MARKER.match(parts[i - 1])
    text += ("\n" if tight else "\n\n" if i else "") + part
  return text


def render(text):
  out = Rendered()
  for kind, lines in blocks(text):
    if kind == "fence":
      out.parts.append(textwrap.dedent("\n".join(lines)))
    else:
      render_block(lines, out)
  return out


def fields(cls):
  """The annotated class attributes of a class: (name, type, default) in source order."""
  found = []
  functions = [m for m in cls.members.values() if not m.is_alias and m.is_function]
  for name, member in cls.members.items():
    if member.is_alias or not member.is_attribute or name.startswith("_"):
      continue
    if member.annotation is None or "ClassVar" in str(member.annotation) or (
        "property" in member.labels):
      continue
    if any(f.lineno <= member.lineno <= f.endlineno for f in functions):
      continue  # self.name = ... in a method, not a field
    default = "" if member.value is None else f"`{member.value}`"
    found.append((name, str(member.annotation), default))
  return found


def cell(text):
  return text.replace("|", "\\|")


def fields_table(cls, out):
  """A table of the class's fields; items of its docstring naming a field move into it."""
  rows = fields(cls)
  if not rows:
    return ""
  names = {name for name, _, _ in rows}
  meanings, moved = {}, set()
  for item_names_, _, text, index in out.items:
    if item_names_ and all(n in names for n in item_names_):
      for n in item_names_:
        meanings[n] = escape(text)
      moved.add(index)
  out.parts = [p for i, p in enumerate(out.parts)
               if i not in moved and not (moved and p in SECTIONS)]
  lines = ["**Fields**", "", "| field | type | default | meaning |", "|---|---|---|---|"]
  lines += [f"| `{name}` | `{cell(kind)}` | {cell(default)} | {cell(meanings.get(name, ''))} |"
            for name, kind, default in rows]
  return "\n".join(lines)


def convert(obj):
  """Rewrites obj's docstring (and its members') as Markdown, once."""
  if obj.docstring is not None and not getattr(obj.docstring, "_markdown", False):
    out = render(obj.docstring.value)
    table = fields_table(obj, out) if obj.is_class else ""
    obj.docstring.value = joined(out.parts + ([table] if table else []))
    obj.docstring._markdown = True  # pylint: disable=protected-access
  elif obj.docstring is None and obj.is_class and fields(obj):
    obj.docstring = griffe.Docstring(fields_table(obj, Rendered()), parent=obj)
    obj.docstring._markdown = True  # pylint: disable=protected-access
  for member in obj.members.values():
    if not member.is_alias:
      convert(member)


class PlainDocstrings(griffe.Extension):
  """Renders every docstring of a loaded package as Markdown (see the module docstring)."""

  def on_package(self, *, pkg, **kwargs):
    convert(pkg)
