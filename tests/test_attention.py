"""The attention switch (config.attention_impl): every path that runs here equals the
einsum path to 1e-5 in float32 (the core alone, and a whole padded model with its
gradients); the fused paths refuse what they cannot do in one line."""
import json
import os
import subprocess
import sys

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
  return q, k, v, layers.AttentionMask(jnp.asarray(mask)), mask


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


def test_packed_rows_mask_equals_per_example_attention():
  """Packed rows (segment ids): every path's context of a real token equals its example's
  attention alone; splash takes the segments as its own segment ids."""
  q, k, v, _, _ = _qkv_and_bias(2, 128, 2, 8, seed=3)
  segments = np.zeros((2, 128), np.int32)
  segments[0, :50], segments[0, 50:110] = 1, 2  # two examples, then padding
  segments[1, :128] = np.repeat([1, 2, 3], [40, 40, 48])  # three, no padding
  real = (segments > 0).astype(np.int32)
  mask = layers.AttentionMask(jnp.asarray(real), jnp.asarray(segments))
  for impl in ("einsum", "xla", "splash"):
    context, _ = layers.dot_product_attention(q, k, v, mask, impl=impl)
    for row, example in ((0, 1), (0, 2), (1, 1), (1, 3)):
      at = np.flatnonzero(segments[row] == example)
      alone = _plain_attention(q[row:row + 1, at], k[row:row + 1, at], v[row:row + 1, at],
                               np.ones((1, len(at)), np.int32))
      np.testing.assert_allclose(np.asarray(context)[row, at], alone[0], atol=TOL,
                                 err_msg=f"{impl} row {row} example {example}")


def test_a_local_window_is_the_same_in_every_path():
  """window=w (ModernBERT's local layers): each query attends the real keys within w
  positions either side, in every path; packed rows keep their examples apart too."""
  q, k, v, mask, real = _qkv_and_bias(2, 128, 2, 8, seed=4)
  distance = np.abs(np.arange(128)[:, None] - np.arange(128)[None, :])
  for window in (1, 5):
    for impl in ("einsum", "xla", "splash"):
      context, _ = layers.dot_product_attention(q, k, v, mask, impl=impl, window=window)
      for row in range(2):
        n = int(real[row].sum())  # queries at real positions
        for query in sorted({0, min(3, n - 1), n // 2, n - 1}):
          keys = np.flatnonzero((distance[query] <= window) & (real[row] > 0))
          alone = _plain_attention(q[row:row + 1, query:query + 1], k[row:row + 1, keys],
                                   v[row:row + 1, keys], np.ones((1, len(keys)), np.int32))
          np.testing.assert_allclose(np.asarray(context)[row, query], alone[0, 0], atol=TOL,
                                     err_msg=f"{impl} window {window} row {row} query {query}")


@pytest.mark.slow
@pytest.mark.parametrize("scan,impl", [(False, "splash"), (True, "xla")])
def test_modernbert_outputs_and_gradients_equal_across_impls(scan, impl):
  """ModernBERT (global and sliding-window layers, RoPE) through the fused paths, its layers
  unrolled (splash's local mask) or scanned (a traced is-global flag, XLA's window): the
  einsum path's outputs and gradients, padded rows."""
  from bert_jax.models.config import config_for_size
  config = config_for_size("modernbert-tiny", vocab_size=50, hidden_size=16,
                           num_attention_heads=2, intermediate_size=24, num_hidden_layers=3,
                           max_position_embeddings=128, local_attention=8,
                           global_attn_every_n_layers=2, scan_layers=scan,
                           attention_probs_dropout_prob=0.0)
  rng = np.random.default_rng(5)
  ids = jnp.asarray(rng.integers(4, 50, size=(2, 128)), jnp.int32)
  mask = jnp.asarray((np.arange(128)[None] < np.array([[128], [70]])).astype(np.int32))
  reference = BertModel(config)
  variables = reference.init(jax.random.key(0), ids, None, mask)

  def loss(model, params):
    out = model.apply({"params": params}, ids, None, mask)
    return jnp.sum(out.sequence_output * mask[..., None])

  ref_out = reference.apply(variables, ids, None, mask).sequence_output
  ref_grads = jax.grad(lambda p: loss(reference, p))(variables["params"])
  real = np.asarray(mask)[..., None]
  model = BertModel(config.replace(attention_impl=impl))
  out = model.apply(variables, ids, None, mask).sequence_output
  np.testing.assert_allclose(np.asarray(out) * real, np.asarray(ref_out) * real, atol=TOL)
  grads = jax.grad(lambda p: loss(model, p))(variables["params"])
  for (path, g), r in zip(jax.tree_util.tree_flatten_with_path(grads)[0],
                          jax.tree.leaves(ref_grads)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(r), atol=TOL,
                               err_msg=jax.tree_util.keystr(path))


@pytest.mark.slow
def test_splash_under_shard_map_equals_einsum_on_8_device_meshes():
  """tests/attention_mesh_worker.py: a tiny BERT with splash attention (interpreted) under
  data=8, fsdp=8 and (data, tensor) = (2, 4) meshes of 8 simulated devices, heads split over
  tensor, padded and packed rows: its output and parameter gradients equal the einsum
  path's on one device (relative 1e-5)."""
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
         "PYTHONPATH": repo, "JAX_PLATFORMS": "cpu"}
  result = subprocess.run([sys.executable, "tests/attention_mesh_worker.py"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=900)
  assert result.returncode == 0, result.stderr[-3000:]
  diffs = json.loads(result.stdout.strip().splitlines()[-1])
  assert set(diffs) == {"data", "fsdp", "tensor"}
  for mesh, rows in diffs.items():
    for name, (output, grads) in rows.items():
      assert output < TOL and grads < TOL, (mesh, name, output, grads)


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
  q, k, v, mask, _ = _qkv_and_bias(2, 8, 2, 4)
  if jax.default_backend() != "gpu":
    with pytest.raises(ValueError, match="attention_impl='cudnn' needs an NVIDIA GPU"):
      layers.dot_product_attention(q, k, v, mask, impl="cudnn")
  with pytest.raises(ValueError, match="multiples of 128"):
    layers.dot_product_attention(q, k, v, mask, impl="splash")
