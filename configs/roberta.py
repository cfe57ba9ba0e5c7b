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

`size=base`: RoBERTa-base at the paper's scale (Liu et al. 2019, Table 9: batch 8k, 500k steps,
peak lr 6e-4 after 24k warmup steps, Adam b2 0.98 and eps 1e-6, weight decay 0.01, 512-token
FULL-SENTENCES rows, dynamic masking, MLM only, a 50,265-entry byte-level BPE vocabulary);
bf16 compute, fp32 params and Adam state, no attention guidance:

  python -m bert_jax.train --workdir=gs://bucket/roberta_base \
      --config=configs/roberta.py:size=base,corpus=/data/*.txt,vocab=/models/roberta-base

`vocab` is a folder with vocab.json + merges.txt (HF roberta-base's, or `learn_vocab
--kind=bpe --vocab_size=50265`); `tfds=NAME` reads a tfds dataset instead of `corpus`, `seq=N`
another row length, `runlocal=True` the same model for a smoke test (T64, batch 8, 20 steps).
Planned (not run) for a TPU v4-8 by its own compiler on a CPU machine (`--compile_only
--target=tpu:v4-8 --config.mesh.data=1 --config.mesh.fsdp=4
--config.model.attention_impl=splash --config.model.attention_probs_dropout_prob=0
--config.grad_accum_steps=32`; 2026-12-01, 47695de, libtpu 0.0.42.1, 85 s of compile on a
shared 2-core CPU): the 8,192 x 512 step as 32 micro-batches of 256 needs 13.87 GiB per chip
of v4's 32 (13.48 of it temporaries; the sharded fp32 params and Adam state 0.35). A
compiler estimate, not a run.
"""
from bert_jax.files import storage
from bert_jax.configs import tiny
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args)
from bert_jax.models.config import config_for_size


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="", vocab_size=0, size="",
                  tfds="", seq=0, runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "roberta-tiny", vocab_size=arg.vocab_size or 8192,
      max_position_embeddings=config.model.max_position_embeddings).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/bpe-8k")
  use_roberta_inputs(config)
  return config


def use_roberta_inputs(config):
  """RoBERTa's inputs (Liu et al. 2019, Sec. 4.1-4.2): cased text, <s> ... </s> rows of
  FULL-SENTENCES packed across documents, masks redrawn every epoch, MLM alone."""
  config.data.lower_case = False
  config.data.example_builder = "full_sentences"
  config.data.masking = "token"
  config.data.dupe_factor = 0  # dynamic masking
  config.objectives = "mlm"  # no NSP


def paper_config(arg):
  """configs/roberta.py:size=base (module docstring); each value's source beside it."""
  config = pretraining_config("roberta-base")  # L12/H768/A12, 514 positions (HF roberta-base)
  set_pretraining_data(config, recipe_data_arg(arg, seq=512))  # Table 9: max length 512
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/bpe-50k")
  # Sec. 4.4: byte-level BPE of 50K units; 50,265 with the specials (HF roberta-base).
  config.model.vocab_size = arg.vocab_size or 50265
  use_roberta_inputs(config)
  paper_scale(config, RECIPES, arg)
  return config


def _roberta_base(config):
  """Table 9's RoBERTa-base column, as the roberta-base model card and fairseq's
  examples/roberta/config/pretraining/base.yaml restate it."""
  config.data.batch_size = 8192  # Table 9 / model card: batch size 8k
  # 15% of 512 is 77 (fairseq masks 15% of every row, no cap): 80 bounds it, as base.py.
  config.data.max_predictions_per_seq = 80
  config.num_train_steps = 500_000  # Table 9 / model card: 500K steps
  config.optim.name = "adamw"
  config.optim.learning_rate = 6e-4  # Table 9 / model card: peak lr 6e-4
  config.optim.warmup_steps = 24_000  # Table 9 / model card: warmup 24k, then linear decay
  config.optim.end_learning_rate = 0.0
  config.optim.b1 = 0.9  # model card / base.yaml adam_betas (0.9, 0.98)
  config.optim.b2 = 0.98
  config.optim.eps = 1e-6  # model card / base.yaml adam_eps 1e-06
  config.optim.weight_decay = 0.01  # model card / base.yaml weight_decay 0.01
  config.optim.grad_clip_norm = 0.0  # base.yaml clip_norm: 0 (no clipping)
  config.model.hidden_dropout_prob = 0.1  # base.yaml dropout 0.1
  config.model.attention_probs_dropout_prob = 0.1  # base.yaml attention_dropout 0.1


RECIPES = {"base": _roberta_base}
