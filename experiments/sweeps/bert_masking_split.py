r"""BERT Table 8 at CPU scale: the [MASK] / random / keep split of the selected tokens.

Devlin et al. (2019), Table 8 (BERT-Base, 1M steps) compare the 80/10/10 split with five
others: fine-tuned MNLI barely moves (83.6-84.4) while feature-based NER suffers most when
every selected token becomes [MASK] (100/0/0: 94.0 vs 94.9), the mismatch between
pretraining and fine-tuning inputs the 80/10/10 split was chosen to soften. Here: BERT-Tiny
pretrained 1,000 steps per variant (experiments/sweeps/_ablation.py has the baseline and the
evaluations), two seeds.

  python -m experiments.run bert_masking_split           # 12 runs, each with its fine-tunings
  python -m experiments.run bert_masking_split --print   # the commands
  python -m experiments.report                           # the results page
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS


def _split(mask, random):
  return {"data.mask_token_prob": mask, "data.random_token_prob": random}


VARIANTS = {
    "mask_80_10_10": (_split(0.8, 0.1), "80% [MASK], 10% random, 10% kept (BERT)"),
    "mask_100_0_0": (_split(1.0, 0.0), "100 / 0 / 0"),
    "mask_80_0_20": (_split(0.8, 0.0), "80 / 0 / 20"),
    "mask_80_20_0": (_split(0.8, 0.2), "80 / 20 / 0"),
    "mask_0_20_80": (_split(0.0, 0.2), "0 / 20 / 80"),
    "mask_0_0_100": (_split(0.0, 0.0), "0 / 0 / 100"),
}
PAPER = {
    "source": "Devlin et al. 2019, Table 8 (BERT-Base)",
    "metric": "NER dev F1, feature-based",
    "ours": ("conll_features", "eval_f1"),
    "values": {"mask_80_10_10": 94.9, "mask_100_0_0": 94.0, "mask_80_0_20": 94.6,
               "mask_80_20_0": 94.7, "mask_0_20_80": 94.6, "mask_0_0_100": 94.6},
    "also": {"metric": "MNLI-m dev accuracy, fine-tuned",
             "values": {"mask_80_10_10": 84.2, "mask_100_0_0": 84.3, "mask_80_0_20": 84.1,
                        "mask_80_20_0": 84.4, "mask_0_20_80": 83.7, "mask_0_0_100": 83.6}},
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS)
