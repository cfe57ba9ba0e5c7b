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

`size=base|large`: SpanBERT at the paper's scale (Joshi et al. 2020, Sec. 3 and 4.1,
Appendix: BERT-base / BERT-large shapes, single contiguous segments of up to 512 tokens, no
NSP, span masking of 15% with geometric(0.2) lengths clipped at 10 words, MLM + SBO; batch
256 x 512, 2.4M steps, Adam at lr 1e-4 after 10k warmup steps then linear decay, weight
decay 0.01, dropout 0.1; BERT's cased 28,996-piece WordPiece vocabulary); bf16 compute,
fp32 params and Adam state, no attention guidance:

  python -m bert_jax.train --config=configs/spanbert.py:size=large,corpus=/data/*.txt \
      --workdir=gs://bucket/spanbert_large

`vocab` is a WordPiece vocab.txt (default: BERT-cased's, under the data root); `tfds=NAME`
reads a tfds dataset instead of `corpus`, `seq=N` another row length, `runlocal=True` the
same model for a smoke test (T64, batch 8, 20 steps).
"""
from bert_jax.configs import tiny
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", size="", vocab="", tfds="", seq=0,
                  runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg, "vocab")
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  use_spanbert_inputs(config)
  return config


def use_spanbert_inputs(config):
  """SpanBERT's inputs and losses (Joshi et al. 2020, Sec. 3.1-3.3 and 4.1): one segment of
  whole sentences of one document per row, up to the row length, no NSP; whole-word spans
  masked until 15% of the tokens, their lengths geometric(0.2) clipped at 10 words
  (pretrain/selectors.py SPAN_GEOMETRIC_P, SPAN_MAX_WORDS), one 80/10/10 decision per span;
  MLM + the span boundary objective."""
  config.data.example_builder = "doc_sentences"
  config.data.masking = "span"
  config.objectives = "mlm,sbo"


def paper_config(arg):
  """configs/spanbert.py:size=base|large (module docstring); each value's source beside it."""
  size = RECIPE_SIZES.get(arg.size, "base")
  # Sec. 4.1: the same model configuration as BERT-base / BERT-large (GeLU, dropout 0.1).
  config = pretraining_config(size, vocab_size=28996)  # BERT-cased vocab.txt: 28,996 pieces
  set_pretraining_data(config, recipe_data_arg(arg, seq=512))  # Sec. 4.1: up to 512 tokens
  # Sec. 4.1: the cased corpus and vocabulary (the released spanbert-*-cased models).
  config.data.vocab_path = arg.vocab or "bert/cased_L-12_H-768_A-12/vocab.txt"
  config.data.lower_case = False
  use_spanbert_inputs(config)
  paper_scale(config, RECIPES, arg)
  return config


def _spanbert(config):
  """The recipe both sizes share (Sec. 4.1, Implementation, and the appendix's
  pre-training procedure)."""
  config.data.batch_size = 256  # batch size 256 sequences
  # 15% of 512 is 77 (the span budget); 80 bounds it, as configs/base.py at 512.
  config.data.max_predictions_per_seq = 80
  config.data.masked_lm_prob = 0.15  # Sec. 3.1: 15% of the tokens masked
  config.num_train_steps = 2_400_000  # 2.4M steps
  config.optim.name = "adamw"
  config.optim.learning_rate = 1e-4  # peak lr 1e-4
  config.optim.warmup_steps = 10_000  # linear warmup over 10k steps, then linear decay
  config.optim.end_learning_rate = 0.0
  config.optim.b1 = 0.9  # beta1 0.9, beta2 0.999
  config.optim.b2 = 0.999
  config.optim.eps = 1e-8  # Adam epsilon 1e-8
  config.optim.weight_decay = 0.01  # L2 weight decay 0.01
  config.optim.grad_clip_norm = 1.0  # as BERT's optimization.py (the paper names none)
  config.model.hidden_dropout_prob = 0.1  # dropout 0.1 on all layers
  config.model.attention_probs_dropout_prob = 0.1


RECIPES = {"base": _spanbert, "large": _spanbert}
RECIPE_SIZES = {"base": "base", "large": "large"}
