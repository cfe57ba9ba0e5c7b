"""Loss helpers shared by every task: sums over rows, divided later by whole-batch counts."""
import jax.numpy as jnp
import optax


def xent_sums(logits, labels, weights=None):
  """logits [..., C], int labels [...], weights [...] (None: all 1) -> (loss sum, correct sum).

  Cross-entropy in float32; `correct` counts argmax hits. Both are weighted sums, so a
  caller divides by its own count (predictions, examples) over the whole batch.
  """
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
  correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
  if weights is None:
    return jnp.sum(losses), jnp.sum(correct)
  return jnp.sum(losses * weights), jnp.sum(correct * weights)


def sigmoid_xent_sums(logits, targets):
  """logits [B, C], 0/1 targets [B, C] -> (loss sum, exact-match sum): multi-label.

  Each example's loss is its mean over the C classes of the binary cross-entropy of
  sigmoid(logit) (HF's BCEWithLogitsLoss, in float32); an exact match is an example whose
  every class is on the right side of logit 0. Both are sums over the B examples.
  """
  logits = logits.astype(jnp.float32)
  losses = optax.sigmoid_binary_cross_entropy(logits, targets.astype(jnp.float32))
  exact = jnp.all((logits > 0) == (targets > 0.5), axis=-1).astype(jnp.float32)
  return jnp.sum(jnp.mean(losses, axis=-1)), jnp.sum(exact)
