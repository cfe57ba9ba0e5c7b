r"""ALBERT Table 5's direction at CPU scale: no sentence task vs NSP vs SOP.

Lan et al. (2019), Table 5 (ALBERT-base): an NSP head cannot solve SOP (it stays near
chance there) while an SOP head solves NSP fairly well, and SOP gives the better
downstream average. Here the ablation baseline (experiments/sweeps/_ablation.py: BERT-Tiny,
8k WordPiece vocab, 1,000 steps, two seeds, the same fine-tunings) with MLM only on single
segments, MLM + NSP on BERT's pairs, or MLM + SOP on ALBERT's swapped consecutive
segments. Ours: each head's held-out accuracy on its own task (eval_nsp_accuracy,
eval_sop_accuracy), and, as the paper's cross columns, on the other task's pairs: the NSP
and SOP runs have one more stage, `cross`, an evaluation of the pretrained workdir
(num_train_steps=0) on the same 20 held-out documents made into the other task's pairs,
scored with the run's own head (objectives nsp_on_sop / sop_on_nsp:
bert_jax/pretrain/objectives.py).

  python -m experiments.run albert_sop
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
EVALUATIONS = ablation.EVALUATIONS + (
    ("held-out NSP acc", ("eval_nsp_accuracy",)),
    ("held-out SOP acc", ("eval_sop_accuracy",)),
    ("NSP head on SOP pairs", ("cross", "eval_nsp_on_sop_accuracy")),
    ("SOP head on NSP pairs", ("cross", "eval_sop_on_nsp_accuracy")),
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
              "the intrinsic accuracy of each head on its own task and on the other's",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"none": 89.9, "nsp": 91.1, "sop": 90.3},
    "also": ({"metric": "downstream Avg", "values": {"none": 79.0, "nsp": 79.2, "sop": 80.1}},
             {"metric": "intrinsic accuracy of its own head (NSP on NSP, SOP on SOP)",
              "values": {"nsp": 90.5, "sop": 86.5}},
             {"metric": "its head on the other task (NSP on SOP, SOP on NSP)",
              "values": {"nsp": 52.0, "sop": 78.9}}),
    "direction": "SOP above NSP above none on the downstream Avg (80.1, 79.2, 79.0), though "
                 "NSP is best on SST-2 alone; the NSP head near chance on SOP (52.0), the SOP "
                 "head well above chance on NSP (78.9)",
}
# The cross stage: (the other task's builder, the objective that reads this run's head).
CROSS = {"nsp": ("sop", "mlm,nsp_on_sop"), "sop": ("nsp_pairs", "mlm,sop_on_nsp")}


def get_sweep():
  runs = ablation.sweep(VARIANTS)()
  for run, spec in runs.items():
    if ablation.variant_of(run) in CROSS:
      builder, objectives = CROSS[ablation.variant_of(run)]
      overrides = {**spec["overrides"], "data.example_builder": builder,
                   "objectives": objectives, "num_train_steps": 0}
      spec["stages"] = {**spec["stages"], "cross": {
          "config": spec["config"], "overrides": overrides,
          "metrics": ("eval_nsp_on_sop_accuracy", "eval_sop_on_nsp_accuracy")}}
  return runs
COLUMNS = ablation.columns(VARIANTS, EVALUATIONS)
