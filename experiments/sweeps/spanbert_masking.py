r"""SpanBERT's ablations at CPU scale: token vs whole-word vs span masking, with and without SBO.

Joshi et al. (2020) ablate the masking scheme (subword tokens, whole words, named entities,
noun phrases, random geometric spans; all with NSP) and the auxiliary objectives (span
masking with NSP, single sequences, single sequences + SBO) in two tables. Their
direction: random spans beat subword tokens and whole words on the span selection tasks
(SQuAD 2.0, NewsQA, TriviaQA, coreference), and SBO on single sequences helps further;
named entities and noun phrases need a tagger/parser and are not run here. The paper's
masking-scheme rows are on bi-sequence inputs with NSP, ours on single segments; its
direction is checked on our SQuAD v1.1 held-out F1.

Here configs/spanbert.py (SpanBERT-Tiny: single segments of whole sentences, no NSP) on the
ablation baseline (experiments/sweeps/_ablation.py: 8k WordPiece vocab, 1,000 steps, two
seeds, the same four fine-tunings) varies only config.data.masking (token, whole_word, span:
geometric(0.2) lengths clipped at 10 words) and whether "sbo" is in config.objectives. A
fifth evaluation is the span task: SQuAD v1.1 (configs/squad.py: the training articles of
squad/du2017_split, 4,000 training windows of 128 tokens, 2 epochs) scored on its held-out
10% of articles.

  python -m experiments.run spanbert_masking
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
STAGES = {
    **ablation.STAGES,
    "squad": {"config": "configs/squad.py:version=1.1,train_examples=4000",
              "overrides": {"optim.learning_rate": "5e-4", "data.max_seq_length": 128,
                            "data.doc_stride": 48, "data.max_query_length": 32},
              "metrics": ("eval_f1", "eval_exact_match")},
}
# SQuAD's EM/F1 are the official script's, in % already.
EVALUATIONS = ablation.EVALUATIONS + (("SQuAD v1.1 held-out F1", ("squad", "eval_f1"), 1.0),)
VARIANTS = {
    "token": ({"data.masking": "token", "objectives": "mlm"}, "subword tokens, MLM"),
    "token_sbo": ({"data.masking": "token", "objectives": "mlm,sbo"},
                  "subword tokens, MLM + SBO"),
    "whole_word": ({"data.masking": "whole_word", "objectives": "mlm"}, "whole words, MLM"),
    "whole_word_sbo": ({"data.masking": "whole_word", "objectives": "mlm,sbo"},
                       "whole words, MLM + SBO"),
    "span": ({"data.masking": "span", "objectives": "mlm"}, "random spans, MLM"),
    "span_sbo": ({"data.masking": "span", "objectives": "mlm,sbo"},
                 "random spans, MLM + SBO (SpanBERT)"),
}
PAPER = {
    "source": "Joshi et al. 2020 (SpanBERT, arXiv 1907.10529), Table 6 (masking schemes, "
              "bi-sequence inputs with NSP; the ablations use 1.2M-step checkpoints) and "
              "Table 7 (auxiliary objectives, single sequences), SQuAD 2.0 dev F1; the named "
              "entity and noun phrase rows have no variant here, nor SBO with tokens or words",
    "metric": "SQuAD 2.0 dev F1, Table 6 (bi-sequence + NSP)",
    "ours": ("squad", "eval_f1"),
    "values": {"token": 83.8, "whole_word": 84.3, "span": 85.4},
    "also": ({"metric": "SQuAD 2.0 dev F1, Table 7 (single sequences)",
              "values": {"span": 86.7, "span_sbo": 86.8}},),
    "direction": "random spans above whole words above subword tokens on SQuAD 2.0 (85.4, "
                 "84.3, 83.8), and span masking + SBO at or above span masking alone (86.8 vs "
                 "86.7; coreference 79.0 vs 76.3)",
}
get_sweep = ablation.sweep(VARIANTS, config="configs/spanbert.py", stages=STAGES)
COLUMNS = ablation.columns(VARIANTS, EVALUATIONS)
