"""Griffe extension: docstrings rendered as the plain text they are written in.

bert_jax's docstrings follow google-research/bert's habit: aligned shape legends, ASCII
tables and `[CLS]`-style tokens. Read as Markdown they would lose their columns and turn
brackets into links, so each one is shown as a preformatted block, as written.
"""
import griffe


class PlainDocstrings(griffe.Extension):
  """Wraps every docstring in a ```text fence."""

  def on_instance(self, *, obj, **kwargs):
    if obj.docstring is not None and not obj.docstring.value.startswith("```"):
      obj.docstring.value = "```text\n" + obj.docstring.value + "\n```"
