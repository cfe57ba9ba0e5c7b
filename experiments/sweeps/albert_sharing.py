r"""ALBERT Table 4 at CPU scale: cross-layer parameter sharing none / attention / FFN / all.

Lan et al. (2019), Table 4 (ALBERT-base, E=768 and E=128): sharing every layer's params
cuts the parameters most and costs some accuracy, most of the cost from sharing the
feed-forward sub-layers; sharing attention alone costs little (none of the paper's numbers
is on this page: the search tool did not reach its tables). Here configs/albert.py
(ALBERT-Tiny: E=64 -> H=128, SOP, n-gram masking) at L4, so that sharing has layers to
share, on the ablation baseline (experiments/sweeps/_ablation.py: the 8k WordPiece vocab
instead of ALBERT's SentencePiece one, 1,000 steps, two seeds, the same fine-tunings) with
config.model.layer_sharing none / attention / ffn / all; nothing else changes.

  python -m experiments.run albert_sharing
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
VARIANTS = {
    sharing: ({"model.num_hidden_layers": 4, "model.layer_sharing": sharing}, label)
    for sharing, label in (("none", "not shared"), ("attention", "shared attention"),
                           ("ffn", "shared FFN"), ("all", "all shared (ALBERT)"))
}
PAPER = {
    "source": "Lan et al. 2019 (ALBERT), Table 4 (ALBERT-base); numbers not retrieved here",
    "metric": "downstream average",
    "ours": ("sst2", "eval_accuracy"),
    "values": {},
    "direction": "not shared above all-shared (fewer parameters, some accuracy lost), FFN "
                 "sharing costing more than attention sharing",
    "order": ("all", "none"),  # expected worse, expected better
}
get_sweep = ablation.sweep(VARIANTS, config="configs/albert.py")
COLUMNS = ablation.columns(VARIANTS)
