r"""How much sentence-order signal do SOP pairs carry that a simple model can read?

  python -m experiments.sop_probe --config=configs/tiny.py:vocab=runs/corpus/vocab-8k.txt \
      --config.data.example_builder=sop --config.data.max_seq_length=64 \
      --config.data.max_predictions_per_seq=10 --config.data.eval_held_out_docs=300

Takes --batches batches of the SOP training input (epoch 0, tokens as before masking) and
every batch of the held-out documents' input, and fits a logistic regression
(scikit-learn, L2, C=--c) on the training pairs to tell swapped (label 1) from in-order
pairs, scored on the held-out pairs, from each feature set:
  edges   which pieces open and close each segment (A's first two and last, B's first
          two and last, one-hot): the discourse markers a sentence starts with ("But",
          "He", "Then") and the ends a quotation leaves open;
  bags    the bag of A's pieces minus the bag of B's (what is mentioned first);
  both    the two together.
Prints, per set, the training and held-out accuracy and the held-out majority share. A
held-out accuracy near the majority share says the pairs' order is not visible to such
features at this length; a clearly higher one is order signal an SOP head could learn.

Measured on the prepared corpus (the command above, --batches=600: 19,200 training pairs,
the vocab-8k WordPiece vocabulary; one run, a shared machine, ~10 min):
  T=64   8,672 held-out pairs, majority 0.5113: edges 0.5570, bags 0.5295, both 0.5316
  T=128  (max_predictions_per_seq=20) 5,120 held-out, majority 0.5029: edges 0.5348,
         bags 0.5254, both 0.5262
(training accuracy 0.69-0.81: the bags overfit). The order is there, but faint.
"""
import sys

import numpy as np
from absl import app
from absl import flags
from ml_collections import config_flags

from bert_jax.pretrain import pipeline
from bert_jax.pretrain.inspect import original_ids
from bert_jax.text.tokenizers import make_tokenizer

if __name__ == "__main__":
  _CONFIG = config_flags.DEFINE_config_file("config", None, "A pretraining config (SOP).")
  _BATCHES = flags.DEFINE_integer("batches", 400, "Training batches to fit on.")
  _C = flags.DEFINE_float("c", 0.1, "Inverse L2 strength of the logistic regression.")


def segments(batch: dict) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
  """(A's pieces, B's pieces, labels) of every unpacked SOP row of a batch."""
  if "example_mask" in batch:
    raise SystemExit("sop_probe: config.data.packing must be off (one pair a row)")
  ids = original_ids(batch)
  real = batch["attention_mask"] > 0
  a, b = [], []
  for row in range(len(ids)):
    types, tokens = batch["token_type_ids"][row][real[row]], ids[row][real[row]]
    a.append(tokens[1:int((types == 0).sum()) - 1])   # [CLS] A [SEP]
    b.append(tokens[types == 1][:-1])                  # B [SEP]
  return a, b, np.asarray(batch["sentence_order_labels"])


def features(a: list[np.ndarray], b: list[np.ndarray], vocab_size: int, kind: str):
  """Sparse [N, F] features of each pair (the module docstring's sets)."""
  from scipy import sparse
  blocks = []
  if kind in ("edges", "both"):
    for segs in (a, b):
      for index in (0, 1, -1):  # the first two pieces and the last (a 1-piece one: twice)
        rows = [i for i, s in enumerate(segs) if len(s)]
        cols = [segs[i][min(index, len(segs[i]) - 1)] for i in rows]
        blocks.append(sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                                        shape=(len(segs), vocab_size)))
  if kind in ("bags", "both"):
    def bag(segs):
      rows = np.repeat(np.arange(len(segs)), [len(s) for s in segs])
      cols = np.concatenate(segs) if segs else np.zeros(0, np.int64)
      return sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(segs), vocab_size))
    blocks.append(bag(a) - bag(b))
  return sparse.hstack(blocks).tocsr()


def collect(stream, batches: int | None):
  a, b, labels = [], [], []
  for i, batch in enumerate(stream):
    if batches is not None and i >= batches:
      break
    batch_a, batch_b, batch_labels = segments({k: np.asarray(v) for k, v in batch.items()})
    a += batch_a
    b += batch_b
    labels.append(batch_labels)
  return a, b, np.concatenate(labels)


def probe(train, held_out, vocab_size: int, c: float) -> dict[str, tuple[float, float]]:
  """{feature set: (training accuracy, held-out accuracy)}; train, held_out: collect()'s."""
  from sklearn.linear_model import LogisticRegression
  scores = {}
  for kind in ("edges", "bags", "both"):
    x_train = features(train[0], train[1], vocab_size, kind)
    x_held = features(held_out[0], held_out[1], vocab_size, kind)
    model = LogisticRegression(C=c, max_iter=2000).fit(x_train, train[2])
    scores[kind] = (model.score(x_train, train[2]), model.score(x_held, held_out[2]))
  return scores


def main(argv):
  del argv
  config = _CONFIG.value
  tokenizer = make_tokenizer(config.data)
  train_input, eval_input = pipeline.make_inputs(config.data, tokenizer)
  if eval_input is None:
    raise SystemExit("sop_probe: set --config.data.eval_held_out_docs (the held-out pairs)")
  train = collect(train_input, _BATCHES.value)
  held_out = collect(eval_input.epoch_batches(0), None)  # the held-out pairs, once
  majority = max(held_out[2].mean(), 1 - held_out[2].mean())
  print(f"pairs: {len(train[2])} training, {len(held_out[2])} held-out "
        f"(majority share {majority:.4f}); T={config.data.max_seq_length}")
  for kind, (train_accuracy, held_out_accuracy) in probe(
      train, held_out, tokenizer.vocab_size, _C.value).items():
    print(f"{kind:6s} train {train_accuracy:.4f}  held-out {held_out_accuracy:.4f}")
  sys.stdout.flush()


if __name__ == "__main__":
  app.run(main)
