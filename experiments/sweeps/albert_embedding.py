r"""ALBERT Table 3 at CPU scale: the factorized embedding width E against E = H.

Lan et al. (2019), Table 3 (ALBERT-base, H=768, E from 64 to 768): without sharing, a wider
E is a little better; with every layer shared, E=128 is best (ALBERT's choice). Here
configs/albert.py (ALBERT-Tiny: L2/H128, SOP, n-gram masking) on the ablation baseline
(experiments/sweeps/_ablation.py: the 8k WordPiece vocab instead of ALBERT's SentencePiece
one, 1,000 steps, two seeds, the same fine-tunings) with E = 32, 64 (ALBERT-Tiny's) and
128 (= H; ALBERT keeps its E -> H projection there, as HF's AlbertModel does), not shared
and all-shared (config.model.layer_sharing).

  python -m experiments.run albert_embedding
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
VARIANTS = {
    f"e{e}_{sharing}": ({"model.embedding_size": e, "model.layer_sharing": sharing},
                        f"E={e}{' (= H)' if e == 128 else ''}, "
                        f"{'not shared' if sharing == 'none' else 'all shared'}")
    for sharing in ("none", "all") for e in (32, 64, 128)
}
PAPER = {
    "source": "Lan et al. 2019 (ALBERT, arXiv 1909.11942v6), Table 3 (ALBERT-base, H=768), "
              "SST-2 dev accuracy and the downstream Avg (SQuAD1.1, SQuAD2.0, MNLI, SST-2, "
              "RACE); rows matched by role: our E=32 / 64 / 128 (half ALBERT-Tiny's E, its E, "
              "= H) beside the paper's E=64 / 128 / 768 (half ALBERT-base's E, its E, = H); "
              "the paper's E=256 has no variant here",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"e32_none": 91.5, "e64_none": 91.5, "e128_none": 92.8,
               "e32_all": 89.4, "e64_all": 90.3, "e128_all": 90.6},
    "also": ({"metric": "downstream Avg",
              "values": {"e32_none": 81.3, "e64_none": 81.7, "e128_none": 82.3,
                         "e32_all": 79.0, "e64_all": 80.1, "e128_all": 79.8}},),
    "direction": "not shared: a wider E slightly better (Avg 81.3, 81.7, 81.8, 82.3 for E=64 "
                 "to 768); all-shared: E=128 best (Avg 80.1)",
}
get_sweep = ablation.sweep(VARIANTS, config="configs/albert.py")
COLUMNS = ablation.columns(VARIANTS)
