r"""ERNIE's knowledge masking at CPU scale: basic (token) masking, + phrases, + entities.

Sun et al. (2019) pretrain ERNIE on 10% of their Chinese corpus with three masking
strategies and fine-tune on XNLI: basic (character) masking alone, + phrase-level, +
phrase-level and entity-level; each level adds accuracy. Their units come from a Chinese
segmenter, chunker and entity recogniser; ours from the codebase's own CoNLL-2003 taggers
fine-tuned from all-MiniLM-L6-v2 (configs/conll.py; their dev scores are in configs/
ernie.py's docstring): the NER model's entities and the chunker's NP / VP / PP ...
chunks, written as the corpus's span file by `python -m bert_jax.commands.tag_spans`.

Here configs/ernie.py (ERNIE-Tiny, BERT-Tiny's shape) on the ablation baseline
(experiments/sweeps/_ablation.py: 8k WordPiece vocab, 1,000 steps of 32 NSP pairs of 64
tokens, two seeds, the same four fine-tunings) varies only the masking:
  token                 masking="token" (BERT's, the paper's basic level);
  token_phrase          masking="mixture" of token:1,phrase:1 (each example draws one);
  token_phrase_entity   masking="mixture" of token:1,phrase:1,entity:1 (ERNIE).
An annotated unit is masked whole or not at all, the 15% budget kept (pretrain/masking.py).
The paper moves through the levels in stages (basic first, then phrases, then entities);
here each example draws its level, so every level is seen throughout. The corpus is the
annotated part of the pretraining text: WikiText-2's validation and test articles, the
State of the Union addresses and the inaugural addresses (KNOWLEDGE_SOURCES), the same
for all three variants.

  python -m experiments.run ernie_masking
  python -m experiments.report

What differs from the paper by construction: its basic unit is the Chinese character and
its phrases and entities are multi-character words and names, so whole-unit masking there
hides what a character-level model cannot read off its neighbours; here the basic unit is
a WordPiece, the chunker's phrases cover 89% of the words (499,600 phrases over 0.90M
words; 60% of them one word, 25% two, 10% three) and 82% of the 37,090 entities are one
word, so many units are single words; the units come from taggers of dev F1 0.76
(entities) and 0.86 (chunks). The paper pretrains a base-size model on 10% of its corpus and reads
XNLI; these runs are a 2-layer model's 1,000 steps read on CoNLL-2003, SST-2 and MRPC.
"""
from experiments.sweeps import _ablation as ablation

KNOWLEDGE = "runs/corpus/knowledge.txt"
KNOWLEDGE_SOURCES = ("wikitext-2/valid.txt", "wikitext-2/test.txt",
                     "nltk_corpora/state_union.zip", "nltk_corpora/inaugural.zip")
# The taggers: fine-tuned from all-MiniLM-L6-v2 on 4,000 CoNLL-2003 training sentences.
_TAGGER = ("python -m bert_jax.train --config=configs/conll.py:column={column},"
           "train_examples=4000 --config.data.max_seq_length=64 --config.num_train_epochs=1 "
           "--config.optim.learning_rate=2e-4 --config.data.packed_rows_multiple=16 "
           "--workdir=runs/conll_{column}")
PREPARE = ablation.PREPARE + (
    (KNOWLEDGE, "python -m bert_jax.text.prepare "
                + " ".join(f"--source={source}" for source in KNOWLEDGE_SOURCES)
                + f" --output={KNOWLEDGE}"),
    ("runs/conll_ner/eval_results.json", _TAGGER.format(column="ner")),
    ("runs/conll_chunk/eval_results.json", _TAGGER.format(column="chunk")),
    ("runs/corpus/knowledge.spans.jsonl",
     "python -m bert_jax.commands.tag_spans --model=runs/conll_ner --phrase_model=runs/conll_chunk "
     f"--input={KNOWLEDGE} --max_length=64"),
)
METRICS = ablation.METRICS
VARIANTS = {
    "token": ({"data.masking": "token", "data.masking_mixture": ""}, "basic (token) masking"),
    "token_phrase": ({"data.masking": "mixture", "data.masking_mixture": "token:1,phrase:1"},
                     "basic + phrase-level"),
    "token_phrase_entity": ({"data.masking": "mixture",
                             "data.masking_mixture": "token:1,phrase:1,entity:1"},
                            "basic + phrase + entity-level (ERNIE)"),
}
PAPER = {
    "source": "Sun et al. 2019 (ERNIE, arXiv 1904.09223), Table 2: XNLI accuracy after "
              "pretraining on 10% of the corpus with each masking strategy (Chinese "
              "characters as the basic level; dev / test)",
    "metric": "XNLI dev accuracy",
    "ours": ("conll", "eval_f1"),
    "values": {"token": 77.7, "token_phrase": 78.3, "token_phrase_entity": 78.7},
    "also": ({"metric": "XNLI test accuracy",
              "values": {"token": 76.8, "token_phrase": 77.3, "token_phrase_entity": 77.6}},),
    "direction": "each level adds accuracy: basic < + phrase < + phrase + entity (77.7, "
                 "78.3, 78.7 dev)",
}
get_sweep = ablation.sweep(VARIANTS, config="configs/ernie.py")
COLUMNS = ablation.columns(VARIANTS)
