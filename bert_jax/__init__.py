"""bert_jax: BERT and its family in JAX/Flax.

  model, variables = bert_jax.load_pretrained(path)   # HF folder, TF checkpoint, or ours
"""
from bert_jax.models.config import BertConfig, config_for_size
from bert_jax.weights import load_pretrained

__all__ = ["BertConfig", "config_for_size", "load_pretrained"]
