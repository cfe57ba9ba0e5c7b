r"""SpanBERT-Tiny (L2/H128/A2) pretraining on the prepared real corpus, on 2 CPU cores:
single segments, span masking, MLM + span boundary objective (Joshi et al., 2020).

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt   # once
  python -m bert_jax.train --config=configs/spanbert.py --workdir=runs/spanbert

Arg (`configs/spanbert.py:corpus=PATH,runlocal=True`): `corpus` is the prepared file;
`runlocal` shrinks everything for a smoke test (seconds).

What differs from configs/tiny.py (BERT): one segment per row, whole sentences of one
document (example_builder=doc_sentences: [CLS] sentences [SEP], no NSP), spans of whole
words masked until 15% (masking=span: lengths ~ geometric(0.2) clipped to 10 words, one
80/10/10 decision per span), and the SBO term (objectives="mlm,sbo": each masked token
predicted again from the states of the tokens just outside its span plus its position in
it). The WordPiece vocabulary, the model size, attention guidance and the schedule are
tiny.py's, so the two runs compare.

Measured (docs/results/pretraining.md; 2-core CPU shared with other jobs, 5-11 s a step):
300 steps (`--config.num_train_steps=300`) in 55 minutes, held-out SBO accuracy 0.046 /
0.061 / 0.071 at steps 100 / 200 / 300 (MLM 0.047 / 0.071 / 0.083), against 0.0498 for
always guessing the most frequent token.
"""
from bert_jax.configs import tiny
from bert_jax.configs.common import parse_arg


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", runlocal=False)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.data.example_builder = "doc_sentences"
  config.data.masking = "span"
  config.objectives = "mlm,sbo"
  return config
