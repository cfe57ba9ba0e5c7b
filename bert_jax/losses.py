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
