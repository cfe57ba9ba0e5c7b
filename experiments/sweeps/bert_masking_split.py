r"""BERT Table 8 at CPU scale: the [MASK] / same / random split of the selected tokens.

Devlin et al. (2019), Table 8 (BERT-Base, 1M steps) compare the 80/10/10 split with five
others, each written as the share of the selected tokens replaced by [MASK] / kept the same /
replaced by a random token (the table's MASK, SAME, RND columns, in that order; the variant
names here follow it): fine-tuned MNLI barely moves (83.6-84.4) while feature-based NER
suffers most when every selected token becomes [MASK] (100/0/0: 94.0 vs 94.9), the mismatch
between pretraining and fine-tuning inputs the 80/10/10 split was chosen to soften. Here:
BERT-Tiny pretrained 1,000 steps per variant (experiments/sweeps/_ablation.py has the
baseline and the evaluations), two seeds.

  python -m experiments.run bert_masking_split           # 12 runs, each with its fine-tunings
  python -m experiments.run bert_masking_split --print   # the commands
  python -m experiments.report                           # the results page
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS


def _split(mask, same, random):
  """The overrides of a [MASK] / same / random split in % (Table 8's column order)."""
  del same  # the rest: 100 - mask - random
  return {"data.mask_token_prob": mask / 100, "data.random_token_prob": random / 100}


VARIANTS = {
    "mask_80_10_10": (_split(80, 10, 10), "80% [MASK], 10% same, 10% random (BERT)"),
    "mask_100_0_0": (_split(100, 0, 0), "100 / 0 / 0"),
    "mask_80_0_20": (_split(80, 0, 20), "80 / 0 / 20"),
    "mask_80_20_0": (_split(80, 20, 0), "80 / 20 / 0"),
    "mask_0_20_80": (_split(0, 20, 80), "0 / 20 / 80"),
    "mask_0_0_100": (_split(0, 0, 100), "0 / 0 / 100"),
}
PAPER = {
    "source": "Devlin et al. 2019, Table 8 (BERT-Base), NER dev F1 feature-based (the last "
              "4 layers concatenated) and fine-tuned, MNLI dev accuracy fine-tuned",
    "metric": "NER dev F1, feature-based",
    "ours": ("conll_features", "eval_f1"),
    "values": {"mask_80_10_10": 94.9, "mask_100_0_0": 94.0, "mask_80_0_20": 94.6,
               "mask_80_20_0": 94.7, "mask_0_20_80": 94.6, "mask_0_0_100": 94.6},
    "also": ({"metric": "NER dev F1, fine-tuned",
              "values": {"mask_80_10_10": 95.4, "mask_100_0_0": 94.9, "mask_80_0_20": 95.2,
                         "mask_80_20_0": 95.2, "mask_0_20_80": 94.8, "mask_0_0_100": 94.9}},
             {"metric": "MNLI dev accuracy, fine-tuned",
              "values": {"mask_80_10_10": 84.2, "mask_100_0_0": 84.3, "mask_80_0_20": 84.1,
                         "mask_80_20_0": 84.4, "mask_0_20_80": 83.7, "mask_0_0_100": 83.6}}),
    "direction": "fine-tuning barely moves (MNLI 83.6-84.4, NER 94.8-95.4); feature-based "
                 "NER is worst with only [MASK] (94.0) and best with BERT's 80/10/10 (94.9)",
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS)
