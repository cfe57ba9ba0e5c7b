"""The attention switch (config.attention_impl): every path that runs here equals the
einsum path to 1e-5 in float32 (the core alone, and a whole padded model with its
gradients); the fused paths refuse what they cannot do in one line."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import layers
from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig

TOL = 1e-5


def _qkv_and_bias(b, t, n, d, seed=0):
  rng = np.random.default_rng(seed)
  q, k, v = (jnp.asarray(rng.normal(size=(b, t, n, d)), jnp.float32) for _ in range(3))
  lengths = rng.integers(1, t + 1, size=b)
  lengths[0] = t  # one full row, one or more padded ones
  mask = (np.arange(t)[None] < lengths[:, None]).astype(np.int32)
  return q, k, v, layers.attention_mask_bias(jnp.asarray(mask)), mask


def _plain_attention(q, k, v, mask):
  """A loop-free numpy reference: softmax over the real keys of each row."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  logits = np.einsum("bfnd,btnd->bnft", q, k) / np.sqrt(q.shape[-1])
  logits = np.where(mask[:, None, None, :] > 0, logits, -np.inf)
  probs = np.exp(logits - logits.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  return np.einsum("bnft,btnd->bfnd", probs, v)


@pytest.mark.parametrize("impl", ["einsum", "xla"])
def test_core_equals_plain_reference(impl):
  q, k, v, bias, mask = _qkv_and_bias(3, 7, 2, 5)
  context, probs = layers.dot_product_attention(q, k, v, bias, impl=impl)
  np.testing.assert_allclose(np.asarray(context), _plain_attention(q, k, v, mask), atol=TOL)
  assert (probs is None) == (impl != "einsum")


def test_splash_interpreted_equals_einsum():
  """Pallas splash attention, run by its interpreter off TPU (T must be a multiple of 128)."""
  q, k, v, bias, _ = _qkv_and_bias(2, 128, 2, 8, seed=1)
  ours, _ = layers.dot_product_attention(q, k, v, bias, impl="einsum")
  splash, _ = layers.dot_product_attention(q, k, v, bias, impl="splash")
  np.testing.assert_allclose(np.asarray(splash), np.asarray(ours), atol=TOL)


def _tiny(impl, **overrides):
  return BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16,
                    attention_impl=impl, **overrides)


def test_model_outputs_and_gradients_equal_across_impls():
  rng = np.random.default_rng(2)
  ids = jnp.asarray(rng.integers(1, 50, size=(3, 9)), jnp.int32)
  mask = jnp.asarray((np.arange(9)[None] < np.array([[9], [4], [6]])).astype(np.int32))
  einsum_model = BertModel(_tiny("einsum"))
  variables = einsum_model.init(jax.random.key(0), ids, None, mask)

  def loss(model, params):
    out = model.apply({"params": params}, ids, None, mask)
    return jnp.sum(out.sequence_output * mask[..., None]) + jnp.sum(out.pooled_output)

  ref_out = einsum_model.apply(variables, ids, None, mask)
  ref_grads = jax.grad(lambda p: loss(einsum_model, p))(variables["params"])
  model = BertModel(_tiny("xla"))
  out = model.apply(variables, ids, None, mask)
  real = np.asarray(mask)[..., None]
  np.testing.assert_allclose(np.asarray(out.sequence_output) * real,
                             np.asarray(ref_out.sequence_output) * real, atol=TOL)
  np.testing.assert_allclose(np.asarray(out.pooled_output), np.asarray(ref_out.pooled_output),
                             atol=TOL)
  grads = jax.grad(lambda p: loss(model, p))(variables["params"])
  for (path, g), r in zip(jax.tree_util.tree_flatten_with_path(grads)[0],
                          jax.tree.leaves(ref_grads)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(r), atol=TOL,
                               err_msg=jax.tree_util.keystr(path))


def test_einsum_keeps_dropout_and_probs_fused_paths_refuse_them():
  ids = jnp.ones((2, 5), jnp.int32)
  model = BertModel(_tiny("einsum", hidden_dropout_prob=0.0))
  variables = model.init(jax.random.key(0), ids)
  # Attention-probability dropout still acts on the einsum path.
  dropped = model.apply(variables, ids, deterministic=False, rngs={"dropout": jax.random.key(1)})
  kept = model.apply(variables, ids)
  assert np.abs(np.asarray(dropped.sequence_output - kept.sequence_output)).max() > 1e-3
  _, state = model.apply(variables, ids, mutable=["intermediates"])
  probs = layers.attention_probs(state["intermediates"], 2)
  assert probs[0].shape == (2, 2, 5, 5)
  np.testing.assert_allclose(np.asarray(probs[1].sum(-1)), 1.0, atol=1e-6)

  fused = BertModel(_tiny("xla", hidden_dropout_prob=0.0))
  with pytest.raises(ValueError, match="attention_impl='xla' has no attention-probability"):
    fused.apply(variables, ids, deterministic=False, rngs={"dropout": jax.random.key(1)})
  with pytest.raises(ValueError, match="does not give attention probabilities"):
    fused.apply(variables, ids, mutable=["intermediates"])
  # With attention dropout off, the fused path trains with hidden dropout alone.
  BertModel(_tiny("xla", attention_probs_dropout_prob=0.0)).apply(
      variables, ids, deterministic=False, rngs={"dropout": jax.random.key(1)})


def test_bad_impls_are_one_line_errors():
  with pytest.raises(ValueError, match="attention_impl='flash' is not one of"):
    _tiny("flash")
  q, k, v, bias, _ = _qkv_and_bias(2, 8, 2, 4)
  if jax.devices()[0].platform != "gpu":
    with pytest.raises(ValueError, match="attention_impl='cudnn' needs an NVIDIA GPU"):
      layers.dot_product_attention(q, k, v, bias, impl="cudnn")
  with pytest.raises(ValueError, match="multiples of 128"):
    layers.dot_product_attention(q, k, v, bias, impl="splash")
  square = jnp.zeros((2, 1, 8, 8))
  with pytest.raises(ValueError, match="key-padding mask"):
    layers.dot_product_attention(q, k, v, square, impl="splash")
