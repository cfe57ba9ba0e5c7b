r"""The figure of the syntactic-heads probe (bert_jax/probe/syntax_heads.py) from its JSON.

  python -m experiments.syntax_heads_report \
      --result="all-MiniLM-L6-v2=experiments/results/syntax_heads/minilm.json" \
      --result="random init=experiments/results/syntax_heads/minilm_random.json" \
      --output=experiments/results/plots/syntax_heads.png

The figure is bert_jax.probe.figure.plot_best_heads (notebooks/what_bert_learns.ipynb draws
it too): per relation the best head of each result beside the best offset and Clark et al.'s
head, and the first result's layer x head accuracy for a few relations.
"""
import json

from absl import app
from absl import flags
from matplotlib import pyplot as plt

from bert_jax.probe.figure import plot_best_heads

_RESULTS = flags.DEFINE_multi_string("result", [], "LABEL=PATH of a probe's --output JSON.")
_OUTPUT = flags.DEFINE_string("output", "experiments/results/plots/syntax_heads.png",
                              "Where to write the figure.")


def main(argv):
  del argv
  results = {}
  for spec in _RESULTS.value:
    label, sep, path = spec.partition("=")
    if not sep:
      raise app.UsageError(f"--result={spec!r}: expected LABEL=PATH")
    with open(path, encoding="utf-8") as f:
      results[label] = json.load(f)
  if not results:
    raise app.UsageError("give at least one --result=LABEL=PATH")
  plt.close(plot_best_heads(results, _OUTPUT.value))
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
