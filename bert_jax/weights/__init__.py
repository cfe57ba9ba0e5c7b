"""Weights: one loader for HF folders, Google TF checkpoints and bert_jax saved models /
training workdirs (loader.py), each format's files (hf_files.py, an HF folder's files on
disk, with hf.py, its tensors <-> our params, and hf_families.py, its table of HF families;
tf_checkpoint.py; checkpoint.py, our model folders' format), the HF names of our params as
data (mapping.py), and a checkpoint's weights adapted to the model a run builds
(transfer.py; the trainer's init chain around it is bert_jax/run/init_chain.py).

  source = weights.resolve(path)                     # format, config, task, labels: read once
  model, variables = weights.load_pretrained(source)
  params, notes = weights.init_params(params, source, model_config)

The names here are the package's API, so callers keep one import (`from bert_jax import
weights`) whichever module defines a name.
"""
from bert_jax.weights.loader import Pretrained, check_vocab, detect_format
from bert_jax.weights.loader import label_names, load_config, load_params, load_pretrained
from bert_jax.weights.loader import model_spec, readable_path, resolve
from bert_jax.weights.transfer import init_params

__all__ = ["Pretrained", "check_vocab", "detect_format", "init_params",
           "label_names", "load_config", "load_params", "load_pretrained", "model_spec",
           "readable_path", "resolve"]
