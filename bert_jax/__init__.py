"""bert_jax: BERT and its family in JAX/Flax.

  model, variables = bert_jax.load_pretrained(path)   # HF folder, TF checkpoint, or ours

Importing the package keeps TensorFlow's and XLA's C++ start-up lines and other packages'
deprecation warnings off the terminal (`bert_jax.quiet`; BERT_JAX_VERBOSE=1 or --verbose
keeps them).
"""
from bert_jax import quiet

quiet.install()

from bert_jax.models.config import BertConfig, config_for_size  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402

__all__ = ["BertConfig", "config_for_size", "load_pretrained"]
