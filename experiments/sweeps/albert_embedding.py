r"""ALBERT Table 3 at CPU scale: the factorized embedding width E against E = H.

Lan et al. (2019), Table 3 (ALBERT-base, H=768, E from 64 to 768): without sharing, a wider
E is a little better; with every layer shared, E=128 is best (ALBERT's choice). None of the
paper's numbers is on this page (the search tool did not reach its tables). Here
configs/albert.py (ALBERT-Tiny: L2/H128, SOP, n-gram masking) on the ablation baseline
(experiments/sweeps/_ablation.py: the 8k WordPiece vocab instead of ALBERT's SentencePiece
one, 1,000 steps, two seeds, the same fine-tunings) with E = 32, 64 (ALBERT-Tiny's) and
128 (= H: no projection), not shared and all-shared (config.model.layer_sharing).

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
    "source": "Lan et al. 2019 (ALBERT), Table 3 (ALBERT-base, H=768); numbers not "
              "retrieved here",
    "metric": "downstream average",
    "ours": ("sst2", "eval_accuracy"),
    "values": {},
    "direction": "not shared: a wider E slightly better (E = H best)",
    "order": ("e32_none", "e128_none"),  # expected worse, expected better
}
get_sweep = ablation.sweep(VARIANTS, config="configs/albert.py")
COLUMNS = ablation.columns(VARIANTS)
