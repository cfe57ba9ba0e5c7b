"""bert_jax: BERT and its family in JAX/Flax.

  model, variables = bert_jax.load_pretrained(path)   # HF folder, TF checkpoint, or ours
  outputs = model.apply(variables, input_ids)          # int [B, T] ids

The names here: `load_pretrained` (bert_jax.weights), `BertConfig` and `config_for_size`
(bert_jax.models.config), imported on first use. The models are in
bert_jax.models.bert (BertModel) and bert_jax.models.headed, the tokenizers in
bert_jax.text.tokenizers, the trainer in bert_jax.run.trainer.

Importing the package keeps TensorFlow's and XLA's C++ start-up lines and other packages'
deprecation warnings off the terminal (`bert_jax.startup.quiet`; BERT_JAX_VERBOSE=1 or --verbose
keeps them).
"""
from bert_jax.startup import quiet

quiet.install()

__all__ = ["BertConfig", "config_for_size", "load_pretrained"]

# Name -> the module that defines it, imported on first use: a program that needs no JAX
# (text/prepare.py and its worker processes) imports the package without it.
_LAZY = {"BertConfig": "bert_jax.models.config", "config_for_size": "bert_jax.models.config",
         "load_pretrained": "bert_jax.weights"}


def __getattr__(name: str):
  if name not in _LAZY:
    raise AttributeError(f"module 'bert_jax' has no attribute '{name}'")
  import importlib  # pylint: disable=import-outside-toplevel
  return getattr(importlib.import_module(_LAZY[name]), name)


def __dir__():
  return sorted([*globals(), *__all__])
