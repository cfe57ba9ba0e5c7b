r"""ALBERT Table 4 at CPU scale: cross-layer parameter sharing none / attention / FFN / all.

Lan et al. (2019), Table 4 (ALBERT-base, E=768 and E=128): sharing every layer's params
cuts the parameters most and costs some accuracy, most of the cost from sharing the
feed-forward sub-layers; sharing attention alone costs little (PAPER holds its E=128 half,
the factorized one). Here configs/albert.py (ALBERT-Tiny: E=64 -> H=128, SOP, n-gram
masking) at L4, so that sharing has layers to share, on the ablation baseline
(experiments/sweeps/_ablation.py: the 8k WordPiece vocab instead of ALBERT's SentencePiece
one, 1,000 steps, two seeds, the same fine-tunings) with config.model.layer_sharing none /
attention / ffn / all; nothing else changes.

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
    "source": "Lan et al. 2019 (ALBERT, arXiv 1909.11942v6), Table 4 (ALBERT-base, the E=128 "
              "half: factorized like ALBERT-Tiny's E=64 < H), SST-2 dev accuracy and the "
              "downstream Avg (SQuAD1.1, SQuAD2.0, MNLI, SST-2, RACE)",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"none": 91.5, "attention": 91.9, "ffn": 91.7, "all": 90.3},
    "also": ({"metric": "downstream Avg",
              "values": {"none": 81.6, "attention": 81.7, "ffn": 80.2, "all": 80.1}},),
    "direction": "all-shared below not shared (Avg 80.1 vs 81.6 at E=128; 79.8 vs 82.3 at "
                 "E=768) with far fewer parameters (12M vs 89M), most of the cost from sharing "
                 "the FFN (80.2); sharing attention alone costs nothing at E=128 (81.7)",
}
get_sweep = ablation.sweep(VARIANTS, config="configs/albert.py")
COLUMNS = ablation.columns(VARIANTS)
