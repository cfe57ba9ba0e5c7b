r"""DistilBERT's ablation at CPU scale: a distilled student vs the same student untaught.

A distilled student against the same student started from the teacher's layers without the
teacher, and the same student from scratch.

Sanh et al. (2019), Table 4 on GLUE: removing the teacher's soft targets, the cosine loss
or the initialisation from the teacher's layers each costs score, the random initialisation
the most (-3.69 macro-score). Here the teacher is the ablation baseline itself (configs/tiny.py:
BERT-Tiny L2/H128, 8k WordPiece vocab, 1,000 steps; run `teacher_sSEED`, first in each
seed, and evaluated like the students as a reference row); each student is
configs/distilbert.py's one-layer DistilBERT-family model (rows of 64 tokens, FULL-SENTENCES,
1,000 steps) reading that seed's teacher:
  distilled     from the teacher's layer 0, embeddings and MLM head; 5 distill + 2 MLM + 1 cosine;
  teacher_init  the same initialisation, MLM only (no teacher forward pass);
  scratch       random initialisation, MLM only.
The evaluations are _ablation's; the feature-based CoNLL tagger reads the student's two
hidden states (embeddings, layer 1) where the teacher's reads three.

  python -m experiments.run distillation
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
VARIANTS = {
    "teacher": ({}, "teacher: BERT-Tiny L2 (the baseline)"),
    "distilled": ({}, "student L1, distilled from the teacher"),
    "teacher_init": ({"objectives": "mlm"}, "student L1 from the teacher's layer, MLM only"),
    "scratch": ({"objectives": "mlm", "distillation.student_layers": ""},
                "student L1 from scratch, MLM only"),
}
PAPER = {
    "source": "Sanh et al. 2019 (DistilBERT, arXiv 1910.01108), Table 1 (BERT-base teacher "
              "against DistilBERT, 6 of its 12 layers, GLUE dev, medians of 5 runs), SST-2 dev "
              "accuracy and the GLUE macro-score; Table 4 (ablation, deltas of the GLUE "
              "macro-score) has no row like teacher_init or scratch here (it removes one loss "
              "at a time), so its numbers are in the direction only",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"teacher": 92.7, "distilled": 91.3},
    "also": ({"metric": "GLUE macro-score", "values": {"teacher": 79.5, "distilled": 77.0}},),
    "direction": "the distilled student a little below its teacher (GLUE 77.0 vs 79.5); from "
                 "the triple-loss student with the teacher's layers, random initialisation "
                 "costs the most (-3.69 GLUE), then dropping the distillation loss (-2.96) or "
                 "the cosine loss (-1.46), dropping MLM the least (-0.31)",
}
_STUDENT_STAGES = {
    **ablation.STAGES,
    "conll_features": {**ablation.STAGES["conll_features"],
                       "overrides": {**ablation.STAGES["conll_features"]["overrides"],
                                     "feature_layers": "0,1"}},
}


def get_sweep():
  runs = {}
  for seed in ablation.SEEDS:
    teacher = f"runs/distillation/teacher_s{seed}"
    for name, (changes, label) in VARIANTS.items():
      if name == "teacher":
        config, stages = "configs/tiny.py", None
      else:
        config, stages = f"configs/distilbert.py:teacher={teacher}", _STUDENT_STAGES
      runs.update(ablation.sweep({name: (changes, label)}, config=config, seeds=(seed,),
                                 stages=stages)())
  return runs


COLUMNS = ablation.columns(VARIANTS)
