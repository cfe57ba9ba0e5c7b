"""Attention guidance: an auxiliary pretraining loss that pulls chosen heads towards fixed
patterns (Deshpande & Narasimhan 2020, "Guiding Attention for Self-Supervised Learning
with Transformers").

Why: a masked token's own input says nothing about it, so MLM needs heads that look at
the neighbours, and learned absolute positions + content attention find them only after
a long plateau in which the model predicts the unigram distribution (the tiny config on
2 CPU cores sat there for 5,000+ steps). Telling one head per pattern where to look ends
the plateau at once. The architecture is unchanged (still BERT, still exports to HF):
only the loss gains a term, and `weight=0` (the default) turns it off.

config.attention_guidance fields:
  weight: the loss term's weight (0 = off).
  patterns: comma-separated, one per head in order: pattern k guides head k of every
    guided layer. "previous" (key i-1), "next" (key i+1), "first" (the [CLS] key).
  layers: comma-separated layer indices to guide ("" = every layer).

The term is the cross-entropy from the pattern to the head's attention row, i.e.
-log p[query -> target key], averaged over every (layer, guided head, real query) that
has a target: [CLS] has no previous key, the last real token no next one.
"""
import dataclasses

import jax
import jax.numpy as jnp
import ml_collections

PATTERNS = ("previous", "next", "first")


def default_config() -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(weight=0.0, patterns="previous,next", layers=""))


@dataclasses.dataclass(frozen=True)
class AttentionGuidance:
  weight: float
  patterns: tuple[str, ...]
  layers: tuple[int, ...]  # resolved: never empty

  def targets(self, attention_mask):
    """[B, T] 0/1 mask -> (target key index [K, T], valid [K, B, T]) per pattern k."""
    mask = attention_mask.astype(bool)
    seq_len = mask.shape[1]
    query = jnp.arange(seq_len)
    index, valid = [], []
    for name in self.patterns:
      if name == "previous":
        target, ok = query - 1, query >= 1
      elif name == "next":
        target, ok = query + 1, query + 1 < seq_len
      else:  # first
        target, ok = jnp.zeros_like(query), jnp.ones_like(query, bool)
      target = jnp.clip(target, 0, seq_len - 1)
      index.append(target)
      valid.append(mask & ok[None, :] & jnp.take(mask, target, axis=1))
    return jnp.stack(index), jnp.stack(valid)

  def count(self, attention_mask) -> jax.Array:
    """The loss term's denominator: guided (layer, head, query) triples with a target."""
    _, valid = self.targets(attention_mask)
    return jnp.sum(valid.astype(jnp.float32)) * len(self.layers)

  def loss_sum(self, probs, attention_mask) -> jax.Array:
    """probs: L x [B, N, F, T] attention weights -> the summed cross-entropy."""
    index, valid = self.targets(attention_mask)
    total = jnp.float32(0.0)
    for layer in self.layers:
      for k in range(len(self.patterns)):
        rows = probs[layer][:, k].astype(jnp.float32)                     # [B, F, T]
        picked = jnp.take_along_axis(rows, index[k][None, :, None], axis=2)[..., 0]
        nll = -jnp.log(jnp.maximum(picked, 1e-9))                          # [B, F]
        total += jnp.sum(jnp.where(valid[k], nll, 0.0))
    return total


def from_config(config, num_layers: int, num_heads: int) -> AttentionGuidance | None:
  """The guidance config.attention_guidance asks for, checked; None when it is off."""
  fields = config.get("attention_guidance") if config is not None else None
  if fields is None or not float(fields.weight):
    return None
  patterns = tuple(p.strip() for p in str(fields.patterns).split(",") if p.strip())
  unknown = [p for p in patterns if p not in PATTERNS]
  if not patterns or unknown:
    raise ValueError(f"config.attention_guidance.patterns={fields.patterns!r}: expected a "
                     f"comma-separated list of {PATTERNS}")
  if len(patterns) > num_heads:
    raise ValueError(f"config.attention_guidance.patterns has {len(patterns)} patterns but "
                     f"the model has {num_heads} heads (one head per pattern)")
  layers = tuple(int(x) for x in str(fields.layers).split(",") if x.strip())
  bad = [i for i in layers if not 0 <= i < num_layers]
  if bad:
    raise ValueError(f"config.attention_guidance.layers={fields.layers!r}: layers {bad} do "
                     f"not exist (the model has {num_layers})")
  return AttentionGuidance(weight=float(fields.weight), patterns=patterns,
                           layers=layers or tuple(range(num_layers)))
