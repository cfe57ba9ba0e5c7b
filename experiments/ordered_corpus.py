r"""Writes a synthetic corpus whose sentence order is visible: a control for SOP.

  python -m experiments.ordered_corpus --output=runs/corpus/ordered.txt

Each document is twelve sentences; sentence i opens with the number word of i ("One",
"Two", ... "Twelve") followed by 5-10 words drawn uniformly from a small fixed list, so
nothing but the number words tells one sentence's place from another's. Whether segment A
comes before segment B (ALBERT's sentence-order prediction) is then read off the first
number word after [CLS] against the first one after [SEP]: a model and input pipeline that
can learn SOP at all learn it here. The file is in the prepared format (one sentence per
line, a blank line between documents; bert_jax/text/prepare.py), so every pretraining
config reads it with `--config.data.train_files` (or a config's `corpus=` arg).
"""
import argparse
import os
import random

NUMBERS = ("one two three four five six seven eight nine ten eleven twelve").split()
WORDS = ("the man went to house and saw a dog with her little old good time day night "
         "water found long way").split()


def documents(count: int, seed: int):
  """count documents, each a list of len(NUMBERS) sentences."""
  rng = random.Random(seed)
  for _ in range(count):
    yield [" ".join([number.capitalize()] + [rng.choice(WORDS) for _ in range(rng.randint(5, 10))])
           + "." for number in NUMBERS]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output", required=True)
  parser.add_argument("--documents", type=int, default=600)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
  with open(args.output, "w", encoding="utf-8") as f:
    for document in documents(args.documents, args.seed):
      f.write("\n".join(document) + "\n\n")
  print(f"wrote {args.documents} documents of {len(NUMBERS)} sentences to {args.output}")


if __name__ == "__main__":
  main()
