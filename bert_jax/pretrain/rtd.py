"""ELECTRA's replaced-token detection (Clark et al. 2020): the generator's samples replace
the masked tokens, and the discriminator tells, for every real token, whether it was
replaced.

  original = the batch's input with masked_lm_ids put back at the masked positions
  sampled  ~ softmax(generator MLM logits / temperature) at each masked position,
             gradient-free (the generator learns from its MLM loss only)
  corrupted = original with `sampled` at the masked positions
  labels   = 1 where corrupted != original (a sample equal to the original token counts
             as original), 0 elsewhere and at padding

Loss term `rtd` (objectives.OBJECTIVES; ELECTRA weighs it 50 against the generator's MLM:
config.objectives="mlm:1,rtd:50"): sigmoid cross-entropy of the discriminator's logits
against the labels, averaged over real tokens (ELECTRA's disc_loss). Logged: rtd_loss,
rtd_accuracy, rtd_baseline_accuracy (the share of real tokens not replaced: what
predicting "original" everywhere scores), rtd_replaced_accuracy (recall on the
replaced tokens), rtd_precision (the share of the tokens it flags as replaced that were),
and rtd_replaced_prob / rtd_original_prob (the mean predicted probability of "replaced" on
the replaced and on the original tokens: the two part before any token crosses 0.5).

Shape legend: B batch, T length, P masked positions, V vocab.
"""
import jax
import jax.numpy as jnp
import optax


def original_ids(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
  """[B, T]: the input with the original ids put back at the real masked positions."""
  current = jnp.take_along_axis(input_ids, masked_lm_positions, axis=1)  # [B, P]
  values = jnp.where(masked_lm_weights > 0, masked_lm_ids, current)
  return _scatter(input_ids, masked_lm_positions, values)


def _scatter(ids, positions, values):
  """ids [B, T] with values [B, P] written at positions [B, P] (row by row)."""
  return jax.vmap(lambda row, pos, val: row.at[pos].set(val))(ids, positions, values)


def replace_tokens(rng, generator_logits, input_ids, attention_mask, masked_lm_positions,
                   masked_lm_ids, masked_lm_weights, temperature: float = 1.0):
  """(corrupted ids [B, T], replaced labels int32 [B, T]): the discriminator's input and
  targets from the generator's logits [B, P, V] at the masked positions (see the module
  docstring). Sampling is gradient-free and uses `rng`."""
  original = original_ids(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights)
  logits = jax.lax.stop_gradient(generator_logits).astype(jnp.float32) / temperature
  sampled = jax.random.categorical(rng, logits, axis=-1).astype(input_ids.dtype)  # [B, P]
  real_slot = masked_lm_weights > 0
  current = jnp.take_along_axis(original, masked_lm_positions, axis=1)
  corrupted = _scatter(original, masked_lm_positions, jnp.where(real_slot, sampled, current))
  labels = ((corrupted != original) & (attention_mask > 0)).astype(jnp.int32)
  return corrupted, labels


# ------------------------------------------------------------------------- loss term
def rtd_sums(outputs, batch):
  """outputs.rtd_logits [B, T] float32 and outputs.rtd_labels int [B, T]."""
  real = batch["attention_mask"].astype(jnp.float32)
  labels = outputs.rtd_labels.astype(jnp.float32)
  logits = outputs.rtd_logits.astype(jnp.float32)
  losses = optax.sigmoid_binary_cross_entropy(logits, labels)
  predicted = (logits > 0).astype(jnp.float32)
  prob = jax.nn.sigmoid(logits) * real
  hit = (predicted == labels).astype(jnp.float32) * real
  return {"rtd_loss": jnp.sum(losses * real), "rtd_correct": jnp.sum(hit),
          "rtd_original": jnp.sum((1.0 - labels) * real),
          "rtd_replaced": jnp.sum(labels * real),
          "rtd_replaced_correct": jnp.sum(hit * labels),
          "rtd_flagged": jnp.sum(predicted * real),
          "rtd_replaced_prob": jnp.sum(prob * labels),
          "rtd_original_prob": jnp.sum(prob * (1.0 - labels))}


def rtd_denominators(batch):
  return {"rtd": jnp.maximum(jnp.sum(batch["attention_mask"].astype(jnp.float32)), 1.0)}


def rtd_metrics(sums, denominators):
  return {"rtd_loss": sums["rtd_loss"] / denominators["rtd"],
          "rtd_accuracy": sums["rtd_correct"] / denominators["rtd"],
          "rtd_baseline_accuracy": sums["rtd_original"] / denominators["rtd"],
          "rtd_replaced_accuracy": (sums["rtd_replaced_correct"]
                                    / jnp.maximum(sums["rtd_replaced"], 1.0)),
          "rtd_precision": (sums["rtd_replaced_correct"]
                            / jnp.maximum(sums["rtd_flagged"], 1.0)),
          "rtd_replaced_prob": (sums["rtd_replaced_prob"]
                                / jnp.maximum(sums["rtd_replaced"], 1.0)),
          "rtd_original_prob": (sums["rtd_original_prob"]
                                / jnp.maximum(sums["rtd_original"], 1.0))}
