r"""The masking rate: 10, 15, 20, 30 and 40% of the tokens selected for prediction.

BERT fixed 15%; Wettig et al. (2023, "Should You Mask 15% in Masked Language Modeling?")
found 40% better than 15% for BERT-Large on GLUE and SQuAD, and ModernBERT / MosaicBERT
pretrain with 30%. Here BERT-Tiny, 1,000 steps, two seeds (experiments/sweeps/_ablation.py);
max_predictions_per_seq grows with the rate so no selection is cut.

  python -m experiments.run masking_rate
  python -m experiments.report
"""
import math

from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS


def _rate(rate):
  return {"data.masked_lm_prob": rate,
          "data.max_predictions_per_seq": math.ceil(rate * 128) + 1}


VARIANTS = {f"rate_{round(100 * r)}": (_rate(r), f"{round(100 * r)}%" + (" (BERT)" if r == 0.15
                                                                            else ""))
            for r in (0.10, 0.15, 0.20, 0.30, 0.40)}
PAPER = {
    "source": "Wettig et al. 2023, Should You Mask 15% in Masked Language Modeling? (BERT-Large)",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {},
    "direction": "40% is better than 15% for large models on downstream tasks",
    "order": ("rate_15", "rate_40"),
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS)
