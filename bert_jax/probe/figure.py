"""The figure of the syntactic-heads probe (syntax_heads.py), from its results.

Left: per relation, the best head's accuracy for each result beside the best fixed-offset
baseline (of the first result) and Clark et al.'s best BERT-Base head. Right: the first
result's layer x head accuracy, in each relation's better direction, for a few relations.
In the package (not experiments/) so that notebooks/what_bert_learns.ipynb draws it from an
install; experiments/syntax_heads_report.py draws the committed results' figure with it.
"""
import numpy as np
from matplotlib import pyplot as plt

from bert_jax.probe.syntax_heads import CLARK_2019

GRID_RELATIONS = ("det", "pobj", "dobj", "nsubj", "aux", "poss")


def plot_best_heads(results: dict[str, dict], path: str = "", grid=GRID_RELATIONS):
  """results: {label: a `probe` result} -> the figure (also written to path, if given)."""
  first = next(iter(results.values()))
  names = [n for n, r in first["relations"].items() if r["pairs"]]
  fig = plt.figure(figsize=(16, 5.5))
  bars = fig.add_axes((0.04, 0.12, 0.48, 0.78))
  width = 0.8 / (len(results) + 2)
  x = np.arange(len(names))
  for i, (label, result) in enumerate(results.items()):
    best = [100 * result["relations"][n]["best_head"]["accuracy"] for n in names]
    bars.bar(x + i * width, best, width, label=f"{label}: best head")
  offsets = [100 * first["relations"][n]["best_offset"]["accuracy"] for n in names]
  bars.bar(x + len(results) * width, offsets, width, color="0.6", label="best offset")
  clark = [CLARK_2019[n][2] if n in CLARK_2019 else np.nan for n in names]
  bars.bar(x + (len(results) + 1) * width, clark, width, facecolor="white", edgecolor="k",
           hatch="///", label="Clark et al. BERT-Base: best head")
  bars.set_xticks(x + 0.4 - width / 2, names)
  bars.set_ylabel("accuracy (%)")
  bars.set_ylim(0, 125)
  bars.set_yticks(range(0, 101, 20))
  bars.legend(fontsize=8, loc="upper left", ncol=2)
  bars.set_title(f"Best single head per relation ({first['sentences']} sentences)")
  label = next(iter(results))
  for k, name in enumerate(n for n in grid if n in names):
    r = first["relations"][name]
    direction = r["best_head"]["direction"]
    ax = fig.add_axes((0.56 + 0.145 * (k % 3), 0.53 - 0.45 * (k // 3), 0.12, 0.36))
    grid_values = 100 * np.array(r["accuracy"][direction])  # [L, N]
    image = ax.imshow(grid_values, origin="lower", vmin=0, vmax=100, cmap="viridis")
    ax.set_title(f"{name} ({direction})\nbest {r['best_head']['layer']}-"
                 f"{r['best_head']['head']}: {grid_values.max():.0f}%", fontsize=8)
    ax.set_xticks(range(grid_values.shape[1]), range(1, grid_values.shape[1] + 1),
                  fontsize=6)
    ax.set_yticks(range(grid_values.shape[0]), range(1, grid_values.shape[0] + 1),
                  fontsize=6)
    ax.set_xlabel("head", fontsize=7)
    ax.set_ylabel("layer", fontsize=7)
  fig.colorbar(image, ax=fig.axes[1:], fraction=0.02)
  fig.suptitle(f"Layer x head accuracy: {label}", x=0.76, y=0.99, fontsize=10)
  if path:
    fig.savefig(path, dpi=100)
  return fig
