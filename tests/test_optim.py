"""config.optim.layer_decay: layer-wise learning-rate decay (ELECTRA's fine-tuning recipe);
config.optim.word_embedding_lr_scale."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn

from bert_jax.core import optim
from bert_jax.models import headed
from bert_jax.models.config import BertConfig


def _classifier_params(**overrides):
  config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=16, **overrides)
  model = headed.BertForSequenceClassification(config, num_labels=2)
  ids = np.zeros((1, 8), np.int32)
  return nn.unbox(model.init(jax.random.key(0), ids, ids, np.ones_like(ids),
                             deterministic=True)["params"])


def _updates(params, layer_decay, steps=2, word_embedding_lr_scale=1.0):
  """AdamW updates of `steps` steps on fixed random gradients."""
  config = optim.default_optim_config()
  config.update(learning_rate=1e-3, warmup_steps=1, layer_decay=layer_decay, grad_clip_norm=0.0,
                word_embedding_lr_scale=word_embedding_lr_scale)
  tx, _ = optim.make_optimizer(config, total_steps=10)
  leaves, treedef = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(1), len(leaves))
  grads = treedef.unflatten([jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)])
  state = tx.init(params)
  update = jax.jit(tx.update)
  for _ in range(steps):
    updates, state = update(grads, state, params)
  return updates


def _flat(tree):
  return {"/".join(str(getattr(k, "key", k)) for k in path): leaf
          for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def test_each_layer_trains_at_its_decayed_rate():
  """Updates (weight decay included) are plain AdamW's times d^(L+1-depth): embeddings
  d^4, layer i d^(3-i), pooler and classifier 1 (L = 3)."""
  params = _classifier_params()
  plain, decayed = _flat(_updates(params, 1.0)), _flat(_updates(params, 0.5))
  def expected(name):
    if name.startswith("bert/embeddings/"):
      return 0.5 ** 4
    if name.startswith("bert/encoder/layer_"):
      return 0.5 ** (3 - int(name.split("/")[2].removeprefix("layer_")))
    return 1.0
  seen = set()
  for name, update in plain.items():
    np.testing.assert_allclose(decayed[name], expected(name) * update, rtol=1e-6, err_msg=name)
    seen.add(expected(name))
  assert seen == {0.5 ** 4, 0.5 ** 3, 0.5 ** 2, 0.5, 1.0}


def test_scanned_layers_decay_like_unrolled_ones():
  """The stacked `layers` params get one factor per layer along their leading axis."""
  unrolled = _classifier_params()
  scanned = _classifier_params(scan_layers=True)
  got, want = _flat(_updates(scanned, 0.5)), _flat(_updates(unrolled, 0.5))
  plain = _flat(_updates(scanned, 1.0))
  kernel = "bert/encoder/layers/layer/attention/query/kernel"
  factors = np.asarray(got[kernel]) / np.asarray(plain[kernel])
  np.testing.assert_allclose(factors[:, 0, 0, 0], [0.5 ** 3, 0.5 ** 2, 0.5], rtol=1e-5)
  np.testing.assert_allclose(got["bert/embeddings/word_embeddings/embedding"],
                             want["bert/embeddings/word_embeddings/embedding"], rtol=1e-6)


def test_layer_decay_one_is_the_plain_optimizer_and_bad_values_are_refused():
  params = _classifier_params()
  config = optim.default_optim_config()
  assert config.layer_decay == 1.0
  for a, b in zip(jax.tree.leaves(_updates(params, 1.0)), jax.tree.leaves(_updates(params, 1.0))):
    np.testing.assert_array_equal(a, b)
  for bad in (0.0, 1.5):
    config.layer_decay = bad
    with pytest.raises(ValueError, match=f"config.optim.layer_decay={bad}: expected 0 < d <= 1"):
      optim.make_optimizer(config, 10)


def test_a_shared_layer_has_no_depth():
  params = _classifier_params(family="albert", embedding_size=8, layer_sharing="all")
  with pytest.raises(ValueError, match="shared by every layer"):
    _updates(params, 0.8, steps=1)


def test_layer_depths_of_a_modernbert_encoder():
  params = _classifier_params(family="modernbert", global_attn_every_n_layers=3,
                              local_attention=8)
  num_layers, depths = optim.layer_depths(params)
  assert num_layers == 3
  assert depths["bert/embeddings/word_embeddings/embedding"] == 0
  assert depths["bert/encoder/layer_2/mlp/wo/kernel"] == 3
  assert "bert/encoder/final_layer_norm/scale" not in depths  # the top: lr x 1


def test_word_embeddings_train_at_their_scale_and_zero_freezes_them():
  params = _classifier_params()
  plain = _flat(_updates(params, 1.0))
  word = "bert/embeddings/word_embeddings/embedding"
  for factor in (0.1, 0.0):
    scaled = _flat(_updates(params, 1.0, word_embedding_lr_scale=factor))
    for name, update in plain.items():
      np.testing.assert_allclose(scaled[name], (factor if name == word else 1.0) * update,
                                 rtol=1e-6, err_msg=name)
  config = optim.default_optim_config()
  config.word_embedding_lr_scale = 1.5
  with pytest.raises(ValueError, match="word_embedding_lr_scale=1.5: expected 0 <= s <= 1"):
    optim.make_optimizer(config, 10)


@pytest.mark.parametrize("max_norm", [1e3, 1.0])  # below the threshold, then above it
def test_clip_by_global_norm_equals_optax_and_torch(max_norm):
  """One scalar for the whole tree: optax's per-leaf clip to float32 rounding (exactly
  below the threshold), and torch's clip_grad_norm_ (whose 1e-6 is the only difference)."""
  import optax
  torch = pytest.importorskip("torch")
  keys = jax.random.split(jax.random.key(3), 3)
  grads = {"a": jax.random.normal(keys[0], (7, 5)),
           "b": {"c": jax.random.normal(keys[1], (11,)),
                 "d": 3 * jax.random.normal(keys[2], (2, 3))}}
  ours, _ = optim.clip_by_global_norm(max_norm).update(grads, optax.EmptyState())
  theirs, _ = optax.clip_by_global_norm(max_norm).update(grads, optax.EmptyState())
  tensors = [torch.zeros(x.shape, requires_grad=True) for x in jax.tree.leaves(grads)]
  for t, x in zip(tensors, jax.tree.leaves(grads)):
    t.grad = torch.tensor(np.asarray(x))
  torch.nn.utils.clip_grad_norm_(tensors, max_norm)
  for g, a, b, t in zip(jax.tree.leaves(grads), jax.tree.leaves(ours), jax.tree.leaves(theirs),
                        tensors):
    if max_norm > 100:
      np.testing.assert_array_equal(a, g)
      np.testing.assert_array_equal(b, g)
    np.testing.assert_allclose(a, b, rtol=3e-7, atol=0)
    np.testing.assert_allclose(a, t.grad.numpy(), rtol=2e-6, atol=0)
  norm = np.sqrt(sum(np.sum(np.square(np.asarray(x, np.float64))) for x in jax.tree.leaves(ours)))
  if max_norm < 100:
    assert norm == pytest.approx(max_norm, rel=1e-6)


def _schedule(total_steps, **fields):
  config = optim.default_optim_config()
  config.update(learning_rate=1.0, warmup_steps=10, **fields)
  return optim.learning_rate_schedule(config, total_steps)


def test_linear_schedule_is_berts():
  """Warmup 0 -> peak over 10 steps, then a straight line to end_learning_rate at the end."""
  lr = _schedule(110, end_learning_rate=0.1)
  np.testing.assert_allclose([lr(t) for t in (0, 5, 10, 60, 110, 120)],
                             [0.0, 0.5, 1.0, 0.55, 0.1, 0.1], atol=1e-6)


def test_wsd_holds_the_peak_then_decays_as_one_minus_sqrt():
  """ModernBERT's trapezoid: the peak until the last 20% of the steps, then
  end + (peak - end)(1 - sqrt(t / decay))."""
  lr = _schedule(100, schedule="wsd", decay_fraction=0.2, end_learning_rate=0.1)
  np.testing.assert_allclose([lr(t) for t in (5, 10, 50, 80)], [0.5, 1.0, 1.0, 1.0], atol=1e-6)
  for t in (81, 85, 90, 99, 100):
    np.testing.assert_allclose(lr(t), 0.1 + 0.9 * (1 - np.sqrt((t - 80) / 20)), atol=1e-6)
  assert float(lr(150)) == pytest.approx(0.1)


def test_wsd_checkpoints_before_the_decay_continue_a_longer_run():
  """A 1,000-step wsd run has the same learning rates as a 10,000-step one up to its decay
  (step 800), so its checkpoints there continue the longer run; linear decay has none."""
  short, long = (_schedule(n, schedule="wsd") for n in (1000, 10_000))
  steps = np.arange(0, 801, 50)
  np.testing.assert_array_equal([short(t) for t in steps], [long(t) for t in steps])
  assert float(short(900)) < float(long(900)) == 1.0
  linear_short, linear_long = (_schedule(n) for n in (1000, 10_000))
  assert float(linear_short(500)) < float(linear_long(500))


@pytest.mark.parametrize("fields, message", [
    ({"schedule": "cosine"}, r"config.optim.schedule='cosine': expected one of \['linear', "
                             r"'wsd'\]"),
    ({"schedule": "wsd", "decay_fraction": 0.0}, r"config.optim.decay_fraction=0.0: expected "
                                                 r"0 < f <= 1"),
])
def test_bad_schedule_is_one_line(fields, message):
  with pytest.raises(ValueError, match=message):
    _schedule(100, **fields)


def test_stableadamw_equals_torch_optimi():
  """Five steps of our StableAdamW (scale_by_stable_adam + the learning rate) against
  torch-optimi's, the implementation ModernBERT trained with: a decayed kernel and an
  undecayed bias, one gradient spiking 50x (its tensor's RMS term > 1, the step shrunk)."""
  import torch
  from optimi import StableAdamW

  rng = np.random.default_rng(0)
  params = {"dense": {"kernel": rng.normal(size=(6, 4)).astype(np.float32),
                      "bias": rng.normal(size=(4,)).astype(np.float32)}}
  grads = [jax.tree.map(lambda p: rng.normal(size=p.shape).astype(np.float32), params)
           for _ in range(5)]
  grads[3]["dense"]["kernel"] *= 50.0
  tx = optax.chain(optim.scale_by_stable_adam(0.9, 0.98, 1e-6, 0.1, optim.weight_decay_mask),
                   optax.scale_by_learning_rate(1e-2))
  ours, state = params, tx.init(params)
  for g in grads:
    updates, state = tx.update(g, state, ours)
    ours = optax.apply_updates(ours, updates)

  kernel, bias = (torch.nn.Parameter(torch.tensor(params["dense"][k])) for k in ("kernel", "bias"))
  theirs = StableAdamW([{"params": [kernel], "weight_decay": 0.1},
                        {"params": [bias], "weight_decay": 0.0}],
                       lr=1e-2, betas=(0.9, 0.98), eps=1e-6, foreach=False, triton=False)
  for g in grads:
    kernel.grad, bias.grad = (torch.tensor(g["dense"][k]) for k in ("kernel", "bias"))
    theirs.step()
  np.testing.assert_allclose(ours["dense"]["kernel"], kernel.detach().numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ours["dense"]["bias"], bias.detach().numpy(), rtol=1e-5, atol=1e-6)
  # The spike did take the clipped branch: its tensor's RMS term is well above 1.
  nu = 0.0
  for t, g in enumerate(grads, 1):
    nu = 0.98 * nu + 0.02 * g["dense"]["kernel"] ** 2
    if t == 4:
      assert np.sqrt(np.mean(g["dense"]["kernel"] ** 2 / (nu / (1 - 0.98 ** t)))) > 1.5


def test_stableadamw_by_name_trains():
  """config.optim.name=stableadamw builds it (with the schedule and global-norm clipping)."""
  params = _classifier_params()
  config = optim.default_optim_config()
  config.update(name="stableadamw", learning_rate=1e-3, warmup_steps=1)
  tx, _ = optim.make_optimizer(config, total_steps=10)
  grads = jax.tree.map(jnp.ones_like, params)
  state = tx.init(params)
  for _ in range(2):
    updates, state = tx.update(grads, state, params)
  assert all(np.all(np.isfinite(u)) and np.any(u != 0) for u in jax.tree.leaves(updates))
