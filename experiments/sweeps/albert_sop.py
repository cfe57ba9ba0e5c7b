r"""ALBERT Table 5's direction at CPU scale: no sentence task vs NSP vs SOP.

Lan et al. (2019), Table 5 (ALBERT-base): an NSP head cannot solve SOP (it stays near
chance there) while an SOP head solves NSP fairly well, and SOP gives the better
downstream average. Here the ablation baseline (experiments/sweeps/_ablation.py: BERT-Tiny,
8k WordPiece vocab, 1,000 steps, two seeds, the same fine-tunings) with MLM only on single
segments, MLM + NSP on BERT's pairs, or MLM + SOP on ALBERT's swapped consecutive
segments. Ours: each head's held-out accuracy on its own task (eval_nsp_accuracy,
eval_sop_accuracy in the per-run table). The paper's cross columns (the NSP head scored on
SOP pairs and the reverse) are not ours: a sentence objective reads its own head and label
field (bert_jax/pretrain/objectives.py), so the eval cannot score a head on the other task.
The paper's numbers are not on this page (the search tool did not reach its tables).

  python -m experiments.run albert_sop
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
EVALUATIONS = ablation.EVALUATIONS + (
    ("held-out NSP acc", ("eval_nsp_accuracy",)),
    ("held-out SOP acc", ("eval_sop_accuracy",)),
)
VARIANTS = {
    "none": ({"data.example_builder": "doc_sentences", "objectives": "mlm"},
             "MLM only (single segments)"),
    "nsp": ({"data.example_builder": "nsp_pairs", "objectives": "mlm,nsp"}, "MLM + NSP"),
    "sop": ({"data.example_builder": "sop", "objectives": "mlm,sop"}, "MLM + SOP (ALBERT)"),
}
PAPER = {
    "source": "Lan et al. 2019 (ALBERT), Table 5 (ALBERT-base); numbers not retrieved here",
    "metric": "downstream average",
    "ours": ("sst2", "eval_accuracy"),
    "values": {},
    "direction": "SOP above NSP downstream; the NSP head near chance on SOP, the SOP head "
                 "well above chance on NSP",
    "order": ("nsp", "sop"),  # expected worse, expected better
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS, EVALUATIONS)
