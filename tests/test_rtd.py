"""Replaced-token detection (pretrain/rtd.py): the discriminator's input and labels from
the generator's samples, checked against a plain-Python reading of ELECTRA's rule; the
samples follow softmax(logits / T); no gradient reaches the generator through them; the
loss term's metrics against hand counts.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.pretrain import rtd

MASK = 103


def masked_batch(seed=0, rows=6, length=12, slots=4, vocab=50):
  """A batch in the pipeline's contract: originals masked 80/10/10 at 1-3 positions per
  row (slots past them unused: position 0, weight 0), padding at the end of some rows."""
  rng = np.random.default_rng(seed)
  original = rng.integers(1000, 1000 + vocab, size=(rows, length)).astype(np.int32)
  attention = np.ones((rows, length), np.int32)
  positions = np.zeros((rows, slots), np.int32)
  ids = np.zeros((rows, slots), np.int32)
  weights = np.zeros((rows, slots), np.float32)
  inputs = original.copy()
  for r in range(rows):
    real = length - int(rng.integers(0, 4))
    attention[r, real:] = 0
    inputs[r, real:] = original[r, real:] = 0
    chosen = np.sort(rng.choice(np.arange(1, real), size=int(rng.integers(1, slots)),
                                replace=False))
    for s, p in enumerate(chosen):
      positions[r, s], ids[r, s], weights[r, s] = p, original[r, p], 1.0
      u = rng.random()
      inputs[r, p] = MASK if u < 0.8 else (1000 + int(rng.integers(0, vocab)) if u < 0.9
                                           else original[r, p])
  batch = {"input_ids": inputs, "attention_mask": attention, "masked_lm_positions": positions,
           "masked_lm_ids": ids, "masked_lm_weights": weights}
  return original, {k: jnp.asarray(v) for k, v in batch.items()}


def _replace(rng, logits, batch, temperature=1.0):
  return rtd.replace_tokens(rng, logits, batch["input_ids"], batch["attention_mask"],
                            batch["masked_lm_positions"], batch["masked_lm_ids"],
                            batch["masked_lm_weights"], temperature)


def test_labels_are_exactly_where_the_input_differs_from_the_original():
  original, batch = masked_batch()
  vocab = 1100
  logits = jax.random.normal(jax.random.key(1), (*batch["masked_lm_positions"].shape, vocab))
  # Make some samples equal the original: peak the logits there for the first slot.
  logits = logits.at[:, 0].add(jax.nn.one_hot(batch["masked_lm_ids"][:, 0], vocab) * 50.0)
  corrupted, labels = jax.device_get(_replace(jax.random.key(2), logits, batch))
  np.testing.assert_array_equal(
      jax.device_get(rtd.original_ids(batch["input_ids"], batch["masked_lm_positions"],
                                      batch["masked_lm_ids"], batch["masked_lm_weights"])),
      original)
  positions, weights = np.asarray(batch["masked_lm_positions"]), np.asarray(
      batch["masked_lm_weights"])
  for r in range(original.shape[0]):
    masked = {int(p) for p, w in zip(positions[r], weights[r]) if w > 0}
    for t in range(original.shape[1]):
      if t not in masked:  # untouched: the original token, never "replaced"
        assert corrupted[r, t] == original[r, t] and labels[r, t] == 0, (r, t)
      # replaced exactly where the discriminator's input differs from the original
      assert labels[r, t] == int(corrupted[r, t] != original[r, t]), (r, t)
  first = positions[:, 0]
  assert (corrupted[np.arange(len(first)), first] == original[np.arange(len(first)), first]
          ).all()  # a sample equal to the original counts as original
  assert labels.sum() > 0


def test_samples_follow_the_tempered_softmax():
  _, batch = masked_batch(rows=1, length=6, slots=2)
  batch = {**batch, "masked_lm_weights": jnp.asarray([[1.0, 0.0]]),
           "masked_lm_positions": jnp.asarray([[2, 0]]),
           "attention_mask": jnp.ones((1, 6), jnp.int32)}
  logits = jnp.zeros((1, 2, 1003)).at[0, 0, 1000:1003].set(jnp.asarray([0.0, 1.0, 2.0]))
  logits = logits.at[0, 0, :1000].set(-1e9)
  for temperature in (1.0, 2.0):
    draws = jax.vmap(lambda k, t=temperature: _replace(k, logits, batch, t)[0][0, 2])(
        jax.random.split(jax.random.key(0), 4000))
    freq = np.bincount(np.asarray(draws) - 1000, minlength=3) / 4000
    expect = np.exp(np.array([0.0, 1.0, 2.0]) / temperature)
    np.testing.assert_allclose(freq, expect / expect.sum(), atol=0.03)


def test_no_gradient_reaches_the_generator_through_the_samples():
  _, batch = masked_batch()
  vocab, hidden = 1100, 8
  generator = jax.random.normal(jax.random.key(3), (hidden, vocab))
  disc = jax.random.normal(jax.random.key(4), (vocab, 1))
  features = jax.random.normal(jax.random.key(5), (*batch["masked_lm_positions"].shape, hidden))

  def discriminator_loss(generator_params):
    corrupted, labels = _replace(jax.random.key(6), features @ generator_params, batch)
    logits = disc[corrupted][..., 0]
    outputs = type("Out", (), {"rtd_logits": logits, "rtd_labels": labels})
    sums = rtd.rtd_sums(outputs, batch)
    return rtd.rtd_metrics(sums, rtd.rtd_denominators(batch))["rtd_loss"]

  assert float(discriminator_loss(generator)) > 0
  grad = jax.grad(discriminator_loss)(generator)
  assert float(jnp.abs(grad).max()) == 0.0


def test_rtd_metrics_against_hand_counts():
  logits = jnp.asarray([[2.0, -1.0, 3.0, -2.0], [-1.0, 1.0, -3.0, 0.5]])
  labels = jnp.asarray([[1, 0, 0, 1], [0, 1, 0, 0]])
  mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 1, 0]])
  outputs = type("Out", (), {"rtd_logits": logits, "rtd_labels": labels})
  batch = {"attention_mask": mask}
  got = rtd.rtd_metrics(rtd.rtd_sums(outputs, batch), rtd.rtd_denominators(batch))
  # real tokens: 7; correct: (1,1)(0,0)(0,1x)(1,0x) + (0,0)(1,1)(0,0) -> 5
  assert float(got["rtd_accuracy"]) == pytest.approx(5 / 7)
  assert float(got["rtd_baseline_accuracy"]) == pytest.approx(4 / 7)  # 3 replaced of 7
  assert float(got["rtd_replaced_accuracy"]) == pytest.approx(2 / 3)
  assert float(got["rtd_precision"]) == pytest.approx(2 / 3)  # flagged: 2.0, 3.0, 1.0
  sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
  assert float(got["rtd_replaced_prob"]) == pytest.approx(
      (sig(2.0) + sig(-2.0) + sig(1.0)) / 3, rel=1e-6)
  assert float(got["rtd_original_prob"]) == pytest.approx(
      (sig(-1.0) + sig(3.0) + sig(-1.0) + sig(-3.0)) / 4, rel=1e-6)
  bce = lambda x, y: np.log1p(np.exp(-x)) if y else np.log1p(np.exp(x))  # noqa: E731
  expect = sum(bce(float(logits[r, t]), int(labels[r, t])) for r in range(2) for t in range(4)
               if mask[r, t]) / 7
  assert float(got["rtd_loss"]) == pytest.approx(expect, rel=1e-6)
