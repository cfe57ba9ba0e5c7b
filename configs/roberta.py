r"""RoBERTa-Tiny (L2/H128/A2) pretraining on the prepared real corpus, on 2 CPU cores:
FULL-SENTENCES rows, MLM only, dynamic masking, a byte-level BPE vocabulary learned here
(Liu et al., 2019).

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt            # once
  python -m bert_jax.text.learn_vocab --kind=bpe --input=runs/corpus/pretrain.txt \
      --vocab_size=8192 --output=runs/corpus/bpe-8k                           # once
  python -m bert_jax.train --config=configs/roberta.py --workdir=runs/roberta

Arg (`configs/roberta.py:corpus=PATH,vocab=FOLDER,vocab_size=N,runlocal=True`): the
prepared file, the BPE folder (vocab.json + merges.txt; read as RoBERTa's released kind,
text/tokenizers.py's "bpe") and its entry count; `runlocal` shrinks everything for a smoke
test (seconds).

What differs from configs/tiny.py (BERT): the roberta family (positions from pad_id + 1,
one segment row, no pooler), <s> sentences </s> rows packed across documents
(example_builder=full_sentences), no NSP, masks redrawn every epoch (dupe_factor 0, as in
every config here), the BPE vocabulary. Size, attention guidance and schedule are tiny.py's.
`--config.data.packing=true --config.attention_guidance.weight=0` packs several sentence
blocks per row as separate examples (fill 0.85 -> 0.98 at T=128; pretrain/sentence_blocks.py),
each example's MLM loss as unpacked (guidance's per-row patterns do not pack).

Measured (docs/results/family.md; `python -m experiments.run family_pretraining roberta`,
2026-11-27, de00716, a 2-core CPU shared with 2-3 jobs): 300 steps of 32 x 64 tokens, held-out
MLM accuracy 6.07%; then SST-2 from the workdir (4,000 sentences, 3 epochs) 65.25% dev
accuracy (majority class 50.92%).
"""
from bert_jax import storage
from bert_jax.configs import tiny
from bert_jax.configs.common import parse_arg
from bert_jax.models.config import config_for_size


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="runs/corpus/bpe-8k",
                  vocab_size=8192, runlocal=False)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "roberta-tiny", vocab_size=arg.vocab_size,
      max_position_embeddings=config.model.max_position_embeddings).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab)
  config.data.lower_case = False
  config.data.example_builder = "full_sentences"
  config.data.masking = "token"
  config.data.dupe_factor = 0
  config.objectives = "mlm"
  return config
