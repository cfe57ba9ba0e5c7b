r"""BERT Table 5's direction at CPU scale: MLM + NSP against MLM only.

Devlin et al. (2019), Table 5 (BERT-Base): removing NSP costs MNLI 0.5, QNLI 3.5, MRPC 0.2,
SST-2 0.1 and SQuAD F1 0.6. Here both variants read the same NSP pairs (so only the loss
differs); BERT-Tiny, 1,000 steps, two seeds (experiments/sweeps/_ablation.py).

  python -m experiments.run bert_objectives
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
VARIANTS = {
    "mlm_nsp": ({"objectives": "mlm,nsp"}, "MLM + NSP (BERT)"),
    "mlm_only": ({"objectives": "mlm"}, "MLM only (no NSP)"),
}
PAPER = {
    "source": "Devlin et al. 2019, Table 5 (BERT-Base), SST-2 and MRPC dev accuracy "
              "(BERT-Base against No NSP)",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"mlm_nsp": 92.7, "mlm_only": 92.6},
    "also": ({"metric": "MRPC dev accuracy", "values": {"mlm_nsp": 86.7, "mlm_only": 86.5}},),
    "direction": "removing NSP costs every task a little (MNLI 84.4 -> 83.9, QNLI 88.4 -> "
                 "84.9, MRPC 86.7 -> 86.5, SST-2 92.7 -> 92.6, SQuAD F1 88.5 -> 87.9)",
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS)
