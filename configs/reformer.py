r"""Reformer-Tiny (L2/H128/A2 x 64, local + LSH layers, reversible) pretraining on the
prepared real corpus, on 2 CPU cores: MLM only, full rows of sentences, a SentencePiece
vocabulary learned here (Kitaev et al. 2020, "Reformer: The Efficient Transformer").

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt              # once
  python -m bert_jax.text.learn_vocab --kind=sentencepiece \
      --input=runs/corpus/pretrain.txt --vocab_size=8192 --output=runs/corpus/spm-8k  # once
  python -m bert_jax.train --config=configs/reformer.py --workdir=runs/reformer

Arg (`configs/reformer.py:corpus=PATH,vocab=FOLDER,vocab_size=N,runlocal=True`): the
prepared file, the SentencePiece folder (spiece.model) and its piece count; `runlocal`
shrinks everything for a smoke test (seconds).

What differs from configs/tiny.py (BERT): the reformer family ("reformer-tiny",
models/reformer.py): axial position embeddings (16 x 32), layer 0 local attention in chunks
of 32 tokens (each seeing the chunk before), layer 1 LSH attention (2 hash rounds, chunks of
32, buckets chosen from the length as HF does), reversible layers, ReLU feed-forward, a
2H-wide output read by an untied linear MLM head; no NSP (objectives=mlm, full_sentences
rows); no attention guidance (Reformer's attention has no probabilities to pull); its
tokenizer kind, SentencePiece (as google/reformer-crime-and-punishment's).

Measured (the three commands above, defaults: 1,500 steps of 32 x 128 tokens, 6,144,000
tokens; 2-core AMD EPYC, 2026-11-29, 44fb3b9): 16 min 56 s wall (1,000 s of training,
6,000-7,400 tokens/s); held-out MLM accuracy 0.0478 / 0.0563 / 0.0662 at steps 500 / 1,000 /
1,500, held-out MLM loss 6.66 at the end (training 6.40). Slow to leave the frequent pieces
at this size and budget: an accuracy, not yet a language model.
"""
from bert_jax.files import storage
from bert_jax.models.config import config_for_size
from bert_jax.configs import tiny
from bert_jax.configs.common import parse_arg


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="runs/corpus/spm-8k",
                  vocab_size=8192, runlocal=False)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "reformer-tiny", vocab_size=arg.vocab_size).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab)
  config.data.example_builder = "full_sentences"
  config.objectives = "mlm"
  config.attention_guidance.weight = 0.0
  return config
