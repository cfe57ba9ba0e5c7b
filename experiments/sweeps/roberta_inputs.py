r"""RoBERTa Table 2 at CPU scale: SEGMENT-PAIR + NSP against FULL-SENTENCES and DOC-SENTENCES.

Liu et al. (2019), Table 2 (BERT-Base): dropping NSP and packing whole sentences matches or
beats BERT's segment pairs (MNLI-m 84.0 -> 84.7, SST-2 92.9 / 92.5 / 92.7), DOC-SENTENCES
slightly ahead of FULL-SENTENCES. Here BERT-Tiny, 1,000 steps, two seeds
(experiments/sweeps/_ablation.py); the pair variant is BERT's own input with NSP.

  python -m experiments.run roberta_inputs
  python -m experiments.report
"""
from experiments.sweeps import _ablation as ablation

PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
VARIANTS = {
    "segment_pair_nsp": ({"data.example_builder": "nsp_pairs", "objectives": "mlm,nsp"},
                         "SEGMENT-PAIR + NSP (BERT)"),
    "full_sentences": ({"data.example_builder": "full_sentences", "objectives": "mlm"},
                       "FULL-SENTENCES, MLM only"),
    "doc_sentences": ({"data.example_builder": "doc_sentences", "objectives": "mlm"},
                      "DOC-SENTENCES, MLM only"),
}
PAPER = {
    "source": "Liu et al. 2019 (RoBERTa), Table 2 (BERT-Base architecture, 1M steps of 256 "
              "sequences), SST-2 and MNLI-m dev accuracy (SEGMENT-PAIR with NSP, "
              "FULL-SENTENCES and DOC-SENTENCES without)",
    "metric": "SST-2 dev accuracy",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"segment_pair_nsp": 92.9, "full_sentences": 92.5, "doc_sentences": 92.7},
    "also": ({"metric": "MNLI-m dev accuracy",
              "values": {"segment_pair_nsp": 84.0, "full_sentences": 84.7,
                         "doc_sentences": 84.7}},),
    "direction": "without NSP, packed sentences match or beat SEGMENT-PAIR + NSP (MNLI-m "
                 "84.0 -> 84.7; SQuAD 2.0 F1 78.7 -> 79.1, 79.7), DOC-SENTENCES slightly ahead "
                 "of FULL-SENTENCES; SST-2 is the one column where SEGMENT-PAIR leads",
}
get_sweep = ablation.sweep(VARIANTS)
COLUMNS = ablation.columns(VARIANTS)
