"""The BERT pretraining task: masked LM + next-sentence prediction.

Loss terms are sums over examples/predictions; the trainer divides them by the whole
batch's denominators, so splitting a batch into micro-batches gives the same loss and
gradient as the whole batch.
"""
from typing import Optional

import flax.struct
import jax
import jax.numpy as jnp
import optax

from bert_jax import flops
from bert_jax.data import pretraining as pretraining_data
from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import attention_probs
from bert_jax.models.tasks import BertForPreTraining, PreTrainingOutput
from bert_jax.tasks import attention_guidance


def weighted_xent_sums(logits, labels, weights):
  """logits [..., C] float32, labels int [...], weights [...] -> (loss, correct) sums."""
  losses = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)
  correct = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
  return jnp.sum(losses * weights), jnp.sum(correct * weights)


def _corrupted_weights(batch) -> jax.Array:
  """[B, P] float32: 1.0 at real predictions whose input token differs from the original."""
  observed = jnp.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], axis=1)
  changed = (observed != batch["masked_lm_ids"]).astype(jnp.float32)
  return batch["masked_lm_weights"].astype(jnp.float32) * changed


@flax.struct.dataclass
class PretrainingForward:
  """What `forward` gives `loss_sums`: the model's outputs, plus the summed attention
  guidance term when that is on (training steps only)."""
  outputs: PreTrainingOutput
  guidance_loss: Optional[jax.Array] = None


class PretrainingTask:
  """MLM + NSP on the batches of `bert_jax.data.pretraining`."""

  name = "pretraining"
  # mlm_accuracy_corrupted: accuracy at the predictions whose input token was replaced
  # ([MASK] or random), i.e. without the 10% kept ones a model gets right by copying.
  metric_names = ("loss", "mlm_loss", "mlm_accuracy", "mlm_accuracy_corrupted", "nsp_loss",
                  "nsp_accuracy")

  guidance: Optional[attention_guidance.AttentionGuidance] = None

  def build_model(self, model_config: BertConfig, config=None) -> BertForPreTraining:
    self.guidance = attention_guidance.from_config(
        config, model_config.num_hidden_layers, model_config.num_attention_heads)
    return BertForPreTraining(model_config)

  def make_tokenizer(self, config):
    return pretraining_data.make_tokenizer(config.data)

  def make_inputs(self, config, process_index: int, process_count: int):
    """(train input, eval input or None); see bert_jax.data.pretraining."""
    self.tokenizer = self.make_tokenizer(config)
    return pretraining_data.make_inputs(config.data, process_index=process_index,
                                        process_count=process_count, tokenizer=self.tokenizer)

  def example_batch(self, config, batch_size: int):
    """Zeros of the batch contract's shapes, for init and compile-only runs."""
    t, p = config.data.max_seq_length, config.data.max_predictions_per_seq
    return {
        "input_ids": jnp.zeros((batch_size, t), jnp.int32),
        "token_type_ids": jnp.zeros((batch_size, t), jnp.int32),
        "attention_mask": jnp.ones((batch_size, t), jnp.int32),
        "masked_lm_positions": jnp.zeros((batch_size, p), jnp.int32),
        "masked_lm_ids": jnp.zeros((batch_size, p), jnp.int32),
        "masked_lm_weights": jnp.zeros((batch_size, p), jnp.float32),
        "next_sentence_labels": jnp.zeros((batch_size,), jnp.int32),
    }

  def forward(self, model, params, batch, *, deterministic: bool,
              rng=None) -> PretrainingForward:
    rngs = None if deterministic else {"dropout": rng}
    args = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
            batch["masked_lm_positions"])
    if self.guidance is None or deterministic:
      return PretrainingForward(model.apply({"params": params}, *args,
                                            deterministic=deterministic, rngs=rngs))
    outputs, state = model.apply({"params": params}, *args, deterministic=False, rngs=rngs,
                                 mutable=["intermediates"])
    probs = attention_probs(state["intermediates"], model.config.num_hidden_layers)
    return PretrainingForward(outputs, self.guidance.loss_sum(probs, batch["attention_mask"]))

  def loss_sums(self, forward: PretrainingForward, batch) -> dict[str, jax.Array]:
    outputs = forward.outputs
    weights = batch["masked_lm_weights"].astype(jnp.float32)
    mlm_loss, mlm_correct = weighted_xent_sums(outputs.mlm_logits, batch["masked_lm_ids"],
                                               weights)
    _, mlm_corrupted_correct = weighted_xent_sums(outputs.mlm_logits, batch["masked_lm_ids"],
                                                  _corrupted_weights(batch))
    nsp_weights = jnp.ones(batch["next_sentence_labels"].shape, jnp.float32)
    nsp_loss, nsp_correct = weighted_xent_sums(outputs.nsp_logits,
                                               batch["next_sentence_labels"], nsp_weights)
    sums = {"mlm_loss": mlm_loss, "mlm_correct": mlm_correct,
            "mlm_corrupted_correct": mlm_corrupted_correct, "nsp_loss": nsp_loss,
            "nsp_correct": nsp_correct}
    if forward.guidance_loss is not None:
      sums["attention_guidance_loss"] = forward.guidance_loss
    return sums

  def denominators(self, batch) -> dict[str, jax.Array]:
    denominators = {
        "mlm": jnp.maximum(jnp.sum(batch["masked_lm_weights"].astype(jnp.float32)), 1.0),
        "mlm_corrupted": jnp.maximum(jnp.sum(_corrupted_weights(batch)), 1.0),
        "nsp": jnp.float32(batch["next_sentence_labels"].shape[0])}
    if self.guidance is not None:
      denominators["attention_guidance"] = jnp.maximum(
          self.guidance.count(batch["attention_mask"]), 1.0)
    return denominators

  def loss(self, sums, denominators) -> jax.Array:
    loss = sums["mlm_loss"] / denominators["mlm"] + sums["nsp_loss"] / denominators["nsp"]
    if "attention_guidance_loss" in sums:
      loss += (self.guidance.weight * sums["attention_guidance_loss"]
               / denominators["attention_guidance"])
    return loss

  def metrics(self, sums, denominators) -> dict[str, jax.Array]:
    mlm_loss = sums["mlm_loss"] / denominators["mlm"]
    nsp_loss = sums["nsp_loss"] / denominators["nsp"]
    metrics = {"loss": mlm_loss + nsp_loss, "mlm_loss": mlm_loss,
               "mlm_accuracy": sums["mlm_correct"] / denominators["mlm"],
               "mlm_accuracy_corrupted": (sums["mlm_corrupted_correct"]
                                          / denominators["mlm_corrupted"]),
               "nsp_loss": nsp_loss, "nsp_accuracy": sums["nsp_correct"] / denominators["nsp"]}
    if "attention_guidance_loss" in sums:  # reported apart: `loss` stays MLM + NSP
      metrics["attention_guidance_loss"] = (sums["attention_guidance_loss"]
                                            / denominators["attention_guidance"])
    return metrics

  def step_flops(self, model_config: BertConfig, batch) -> float:
    """Model FLOPs of one training step on this batch."""
    rows, seq_len = batch["input_ids"].shape
    return flops.pretraining_step_flops(model_config, rows, seq_len,
                                        batch["masked_lm_positions"].shape[1])

  def eval_outputs(self, outputs, batch):
    return self.loss_sums(outputs, batch), self.denominators(batch)

  def evaluate(self, run_eval, eval_input, config) -> dict:
    """MLM/NSP loss and accuracy over the held-out batches (config.eval_batches, 0 = all)."""
    sums = denominators = None
    for i, local in enumerate(eval_input.epoch_batches(0)):
      if config.eval_batches and i >= config.eval_batches:
        break
      s, d = run_eval(local)
      sums = s if sums is None else jax.tree.map(jnp.add, sums, s)
      denominators = d if denominators is None else jax.tree.map(jnp.add, denominators, d)
    if sums is None:
      return {}
    return {k: float(v) for k, v in self.metrics(sums, denominators).items()}

  def tokens(self, batch) -> int:
    return int(batch["input_ids"].size)
