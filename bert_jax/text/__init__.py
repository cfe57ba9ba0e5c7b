"""Raw text -> token ids: tokenizers, vocabulary learning, corpus reading and preparation,
and the one data root (paths.py). Imports nothing else from bert_jax."""
