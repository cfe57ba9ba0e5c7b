"""Weights: one loader for HF folders, Google TF checkpoints and bert_jax saved models /
training workdirs (loader.py), our model folders' format (checkpoint.py), and the trainer's
init chain, which starts a run from what the loader reads (init_chain.py).

  model, variables = weights.load_pretrained(path)
  params, lines = weights.fresh_start(config, get_params, model_config, source=source)

The names here are the package's API, so callers keep one import (`from bert_jax import
weights`) whichever module defines a name.
"""
from bert_jax.weights.init_chain import fresh_start, init_params, init_word_vectors
from bert_jax.weights.init_chain import reinit_top_layers
from bert_jax.weights.loader import Pretrained, check_vocab, detect_format, label_names
from bert_jax.weights.loader import load_config, load_params, load_pretrained, model_spec
from bert_jax.weights.loader import readable_path, resolve

__all__ = ["Pretrained", "check_vocab", "detect_format", "fresh_start", "init_params",
           "init_word_vectors", "label_names", "load_config", "load_params", "load_pretrained",
           "model_spec", "readable_path", "reinit_top_layers", "resolve"]
