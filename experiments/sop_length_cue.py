r"""How much of SOP's label do the segment lengths alone give away, here and in the reference?

  python -m experiments.sop_length_cue --config=configs/albert.py \
      --config.data.vocab_path=$PWD/runs/corpus/vocab-8k.txt --config.model.vocab_size=8065 \
      --config.data.max_seq_length=64 --config.data.max_predictions_per_seq=10 \
      --config.data.eval_held_out_docs=20

Builds epoch 0's SOP pairs of the configured training corpus twice, for seeds 0 and 1:
with this codebase's builder (pretrain/builders.py "sop") and with a plain-Python copy of
google-research/albert's create_instances_from_document (without random_next_sentence),
run on the same documents' sentence lengths. For each it prints the share of labels that
"swapped iff the first segment is not the shorter" reads (or its negation, whichever reads
more): 0.5 means the lengths carry no cue.

Measured on the prepared corpus (the command above, the albert_sharing sweep's data):
  seed 0  this builder 0.6471 (83,991 pairs)   reference 0.6159 (91,072 pairs)
  seed 1  this builder 0.6505 (83,894 pairs)   reference 0.6214 (92,108 pairs)
So the cue is mostly the reference's own (B takes the sentence that passes the target
length); the builder's two departures (a chunk closes only with two sentences; a document's
last sentence never stays alone, pretrain/nsp_pairs.py) add ~3 points.
"""
import random
import sys

import numpy as np
from absl import app
from ml_collections import config_flags

from bert_jax.pretrain import pipeline
from bert_jax.text.tokenizers import make_tokenizer

_CONFIG = config_flags.DEFINE_config_file("config", None, "a pretraining config")


def reference_sop_lengths(documents: list[list[int]], max_seq_length: int,
                          rng: random.Random, short_seq_prob: float = 0.1) -> np.ndarray:
  """[pairs, 3] (first length, second length, swapped) of google-research/albert's SOP pairs
  over documents given as sentence lengths: the target drawn once per document, a chunk
  closed at the target or at the document's last sentence, a one-sentence chunk paired with
  a random other document's sentences (label 1), else swapped with p = 1/2; then the
  token-by-token truncation of the longer side."""
  max_tokens = max_seq_length - 3
  pairs = []
  for index, document in enumerate(documents):
    target = max_tokens
    if rng.random() < short_seq_prob:
      target = rng.randint(2, max_tokens)
    chunk = []
    for i, length in enumerate(document):
      chunk.append(length)
      if i < len(document) - 1 and sum(chunk) < target:
        continue
      a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
      first = sum(chunk[:a_end])
      if len(chunk) == 1:
        other = index
        for _ in range(10):
          other = rng.randint(0, len(documents) - 1)
          if other != index:
            break
        second = 0
        for length_b in documents[other][rng.randint(0, len(documents[other]) - 1):]:
          second += length_b
          if second >= target - first:
            break
        swapped = True
      else:
        second = sum(chunk[a_end:])
        swapped = rng.random() < 0.5
        if swapped:
          first, second = second, first
      while first + second > max_tokens:
        if first > second:
          first -= 1
        else:
          second -= 1
      pairs.append((first, second, swapped))
      chunk = []
  return np.array(pairs, np.int64).reshape(-1, 3)


def length_rule(first: np.ndarray, second: np.ndarray, swapped: np.ndarray) -> float:
  agree = float(np.mean((first < second) == ~swapped.astype(bool)))
  return max(agree, 1.0 - agree)


def main(argv):
  del argv
  config = _CONFIG.value
  data = config.data
  train, _ = pipeline.load_corpora(data, make_tokenizer(data))
  corpus = train[0]
  builder = pipeline.builder_for(data)
  options = builder.options(data)
  lengths = np.diff(corpus.sentence_starts)
  documents = [lengths[s:e].tolist() for s, e in zip(corpus.document_starts[:-1],
                                                     corpus.document_starts[1:])]
  for seed in (0, 1):
    ours = builder.instances(corpus, options, np.random.default_rng(seed))
    reference = reference_sop_lengths(documents, data.max_seq_length, random.Random(seed))
    print(f"seed {seed}  this builder "
          f"{length_rule(ours.a_lengths, ours.b_lengths, ours.is_random_next):.4f} "
          f"({len(ours):,} pairs)   reference {length_rule(*reference.T):.4f} "
          f"({len(reference):,} pairs)")
  sys.stdout.flush()


if __name__ == "__main__":
  app.run(main)
