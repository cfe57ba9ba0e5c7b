"""Helpers for tests that compare against HF transformers (PyTorch, CPU)."""
import jax
import numpy as np
from flax import linen as nn

from bert_jax.weights import mapping
from bert_jax.models.config import BertConfig


def hf_config(config: BertConfig):
  """The HF config of config.family (BertConfig, RobertaConfig, DistilBertConfig)."""
  import transformers
  from bert_jax.weights import hf_families
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


# --- parity of our outputs and params with HF's ------------------------------------

TOL = 1e-5  # fp32 outputs of ours and HF's (PyTorch) on CPU


def random_batch(config, lengths, max_len, seed):
  """ids (real tokens never the pad id; padding is the pad id), token types, mask."""
  rng = np.random.default_rng(seed)
  pad = config.pad_token_id
  ids = rng.integers(0, config.vocab_size - 1, size=(len(lengths), max_len))
  ids = np.where(ids >= pad, ids + 1, ids).astype(np.int32)
  mask = (np.arange(max_len)[None] < np.asarray(lengths)[:, None]).astype(np.int32)
  ids = np.where(mask == 1, ids, pad).astype(np.int32)
  types = (rng.integers(0, 2, size=ids.shape) * mask).astype(np.int32)
  return ids, types, mask


def hf_forward(model, config, ids, types, mask):
  """HF outputs; token types only where HF reads them (RoBERTa gets zeros for one row)."""
  import torch
  kwargs = dict(input_ids=torch.tensor(ids, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long))
  if config.type_vocab_size:
    hf_types = types if config.type_vocab_size > 1 else np.zeros_like(types)
    kwargs["token_type_ids"] = torch.tensor(hf_types, dtype=torch.long)
  with torch.no_grad():
    return model(**kwargs, output_hidden_states=True)


def max_diff(ours, theirs, mask=None):
  """The largest |ours - theirs| (at mask's real tokens when given)."""
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
  diff = np.abs(ours - theirs)
  if mask is not None:
    diff = diff * mask.reshape(mask.shape + (1,) * (diff.ndim - mask.ndim))
  return float(diff.max())


def assert_parity(out, ref, config, mask, logits=None):
  """All hidden states (and the MLM logits, the SOP logits where HF has them) within TOL
  at the real tokens."""
  assert len(out.hidden_states) == len(ref.hidden_states) == config.num_hidden_layers + 1
  diffs = {f"hidden_states[{i}]": max_diff(a, b, mask)
           for i, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states))}
  if logits is not None:
    diffs["mlm_logits"] = max_diff(out.mlm_logits, logits, mask)
  if getattr(ref, "sop_logits", None) is not None:
    diffs["sop_logits"] = max_diff(out.sentence_logits["sop"], ref.sop_logits)
  assert max(diffs.values()) < TOL, diffs
  return diffs


def perturbed(params, seed):
  """Non-zero biases and LayerNorms (so mapping mistakes show), float32."""
  leaves, tree = jax.tree.flatten(params)
  rng = np.random.default_rng(seed)
  leaves = [np.asarray(x) + rng.normal(0, 0.1, np.shape(x)).astype(np.float32)
            for x in leaves]
  return jax.tree.unflatten(tree, leaves)


def hf_from_pretrained(folder, cls_name):
  """HF's class loads our folder with no missing or unexpected keys."""
  import transformers
  model, info = getattr(transformers, cls_name).from_pretrained(
      folder, output_loading_info=True, attn_implementation="eager")
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  return model.eval()


def assert_bit_identical(params, back):
  """Two param trees with the same paths and equal arrays."""
  flat_a, flat_b = mapping.flatten(params), mapping.flatten(jax.device_get(back))
  assert flat_a.keys() == flat_b.keys()
  for k in flat_a:
    np.testing.assert_array_equal(flat_a[k], flat_b[k], err_msg=k)


def our_param_count(module):
  """Parameters of a Flax module, counted from shapes only."""
  shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), np.zeros((1, 8), np.int32)))
  return sum(x.size for x in jax.tree.leaves(nn.unbox(shapes["params"])))


def hf_param_count(cls, hf_config):
  """Parameters of an HF class at hf_config, counted on the meta device."""
  import torch
  with torch.device("meta"):  # shapes only, no memory
    model = cls(hf_config)
  return sum(p.numel() for p in model.parameters())  # tied tensors counted once
