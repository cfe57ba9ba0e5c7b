r"""ALBERT Table 5's direction at CPU scale: no sentence task vs NSP vs SOP.

Lan et al. (2019), Table 5 (ALBERT-base): an NSP head cannot solve SOP (it stays near
chance there) while an SOP head solves NSP fairly well, and SOP gives the better
downstream average. Here the ablation baseline (experiments/sweeps/_ablation.py: BERT-Tiny,
8k WordPiece vocab, 1,000 steps, two seeds, the same fine-tunings) with MLM only on single
segments, MLM + NSP on BERT's pairs, or MLM + SOP on ALBERT's swapped consecutive
segments. Ours: each head's held-out accuracy on its own task (eval_nsp_accuracy,
eval_sop_accuracy in the per-run table). The paper's cross columns (the NSP head scored on
SOP pairs and the reverse) are not ours: a sentence objective reads its own head and label
field (bert_jax/pretrain/objectives.py), so the eval cannot score a head on the other task;
the paper's cross numbers are in PAPER's direction.

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
    # Not in the paper: SOP without its length cue (pretrain/builders.py, sop_equal_lengths).
    "sop_equal": ({"data.example_builder": "sop_equal_lengths", "objectives": "mlm,sop"},
                  "MLM + SOP, segments of equal length"),
}
PAPER = {
    "source": "Lan et al. 2019 (ALBERT, arXiv 1909.11942v6), Table 5 (ALBERT-base), SST-2 "
              "dev accuracy, the downstream Avg (SQuAD1.1, SQuAD2.0, MNLI, SST-2, RACE) and "
              "the intrinsic accuracy of each head on its own task",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"none": 89.9, "nsp": 91.1, "sop": 90.3},
    "also": ({"metric": "downstream Avg", "values": {"none": 79.0, "nsp": 79.2, "sop": 80.1}},
             {"metric": "intrinsic accuracy of its own head (NSP on NSP, SOP on SOP)",
              "values": {"nsp": 90.5, "sop": 86.5}}),
    "direction": "SOP above NSP above none on the downstream Avg (80.1, 79.2, 79.0), though "
                 "NSP is best on SST-2 alone; the NSP head near chance on SOP (52.0), the SOP "
                 "head well above chance on NSP (78.9)",
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS, EVALUATIONS)
