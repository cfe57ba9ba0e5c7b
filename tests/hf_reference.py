"""Helpers for tests that compare against HF transformers (PyTorch, CPU)."""
import numpy as np

from bert_jax.models.config import BertConfig


def hf_config(config: BertConfig):
  """The HF config of config.family (BertConfig, RobertaConfig, DistilBertConfig)."""
  import transformers
  from bert_jax.convert import hf_families
  raw = hf_families.config_to_hf(config)
  return transformers.AutoConfig.for_model(raw.pop("model_type"), **raw,
                                           attn_implementation="eager")


def random_hf_model(config: BertConfig, seed: int, cls_name="BertForPreTraining"):
  """A randomly initialised HF model with non-zero biases/LayerNorms (so mapping bugs show)."""
  import torch
  import transformers
  torch.manual_seed(seed)
  model = getattr(transformers, cls_name)(hf_config(config)).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
        p.add_(torch.randn_like(p) * 0.1)
  return model


def hf_state(model) -> dict[str, np.ndarray]:
  return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def padded_batch(vocab_size: int, lengths, max_len: int, seed: int, type_vocab: int = 2):
  rng = np.random.default_rng(seed)
  batch = len(lengths)
  ids = rng.integers(1, vocab_size, size=(batch, max_len)).astype(np.int32)
  types = rng.integers(0, type_vocab, size=(batch, max_len)).astype(np.int32)
  mask = (np.arange(max_len)[None] < np.asarray(lengths)[:, None]).astype(np.int32)
  ids = ids * mask
  types = types * mask
  return ids, types, mask
