r"""Writes an HF folder of every family's tiny size with random weights (seed 0) and BERT's
WordPiece vocab, for experiments/sweeps/family_sst2.py.

  python -m experiments.random_family_folders [--output=runs/family_random]

Each folder (OUTPUT/FAMILY: config.json, model.safetensors, vocab.txt) is what
`transformers` writes for that family's bare encoder (RobertaModel, AlbertModel, ...), so
the fine-tuning CLI takes it as `--config.init_from` like any downloaded checkpoint.
"""
import argparse
import os

import jax
import numpy as np
from flax import linen as nn

from bert_jax.weights import hf
from bert_jax.models.bert import BertModel
from bert_jax.models.config import config_for_size
from bert_jax.text import paths

# Family -> its tiny size (models/config.py SIZES), all with BERT's 30,522-piece vocab.
TINY = {"bert": "tiny", "roberta": "roberta-tiny", "distilbert": "distilbert-tiny",
        "albert": "albert-tiny", "electra": "electra-tiny", "modernbert": "modernbert-tiny"}
VOCAB = "bert/uncased_L-12_H-768_A-12/vocab.txt"


def write(output: str, data_dir: str = "") -> list[str]:
  vocab = paths.resolve(data_dir, VOCAB)
  with open(vocab) as f:
    vocab_size = sum(1 for _ in f)
  folders = []
  for family, size in TINY.items():
    # Every family with BERT's [PAD] = 0 (RoBERTa's and ModernBERT's own vocabs differ).
    config = config_for_size(size, vocab_size=vocab_size, pad_token_id=0)
    if config.max_position_embeddings > 512:
      config = config.replace(max_position_embeddings=512)
    params = nn.unbox(BertModel(config).init(jax.random.key(0),
                                             np.zeros((1, 8), np.int32))["params"])
    folder = os.path.join(output, family)
    hf.save(folder, config, jax.device_get(params), vocab_path=vocab)
    folders.append(folder)
  return folders


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output", default="runs/family_random")
  parser.add_argument("--data_dir", default="")
  args = parser.parse_args(argv)
  for folder in write(args.output, args.data_dir):
    print(f"wrote {folder}")


if __name__ == "__main__":
  main()
