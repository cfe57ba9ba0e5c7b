"""The run's one tokenizer, from the config: the single place that decides which one.

  tokenizer = make_tokenizer(config.data, model_dir=config.init_from)

config.data.vocab_path (relative to the data root) with config.data.lower_case when set;
otherwise the vocabulary saved beside the model being loaded (an HF folder, a bert_jax
workdir or saved model, the folder of a TF checkpoint).
"""
import os

from bert_jax.text import paths
from bert_jax.text.wordpiece import WordPieceTokenizer


def make_tokenizer(data_config, model_dir: str = "") -> WordPieceTokenizer:
  if data_config.get("vocab_path"):
    vocab_path = paths.resolve(data_config.get("data_dir"), data_config.vocab_path)
    if not os.path.isfile(vocab_path):
      raise FileNotFoundError(f"config.data.vocab_path: vocab file not found: {vocab_path}")
    return WordPieceTokenizer(vocab_path, lower_case=data_config.lower_case)
  if not model_dir:
    raise ValueError("config.data.vocab_path is empty and there is no config.init_from to "
                     "take the vocabulary from")
  folder = model_dir if os.path.isdir(model_dir) else os.path.dirname(model_dir)
  if not os.path.isfile(os.path.join(folder, "vocab.txt")):
    raise FileNotFoundError(f"config.init_from={model_dir}: no vocab.txt in {folder}; set "
                            "config.data.vocab_path")
  return WordPieceTokenizer.from_pretrained_dir(folder)
