"""ELECTRA's pretraining task (Clark et al. 2020): config.task="electra".

The pretraining task (pretrain/task.py) with ELECTRA's model and forward: a small MLM
generator reads the masked batch, its samples replace the masked tokens (pretrain/rtd.py,
no gradient through the sampling), and the discriminator tells every real token of that
input whether it was replaced. The two share their embedding tables
(models/electra.py ElectraForPreTraining). Objectives as for pretraining, from config.objectives:
"mlm" is the generator's MLM loss, "rtd" the discriminator's (ELECTRA: "mlm:1,rtd:50").

config.electra (`default_config()`):
  generator_fraction  the generator's hidden size, intermediate size and heads as a share
                      of the discriminator's (the paper: 1/4 for Small and Large, 1/3 Base)
  temperature         the sampling temperature of the generator's softmax (ELECTRA: 1)

Attention guidance (config.attention_guidance, pretrain/attention_guidance.py) applies to
the discriminator, as to BERT. (The tiny configs/electra.py run beats the all-original
baseline only while its generator is worse than the unigram distribution: README, Results.)

Sampling uses the step's key when training (a fold of it, so dropout's key is unchanged)
and a fixed key in evaluation, so held-out numbers are repeatable.

Shape legend: B batch, T length, P masked positions, V vocab.
"""
from typing import Optional

import flax.struct
import jax
import ml_collections

from bert_jax.core import flops
from bert_jax.models.config import generator_config
from bert_jax.models.layers import attention_probs
from bert_jax.pretrain import rtd
from bert_jax.pretrain.task import PretrainingForward, PretrainingTask

_EVAL_SAMPLING_KEY = 0


def default_config() -> ml_collections.ConfigDict:
  """config.electra with its defaults (see the module docstring)."""
  return ml_collections.ConfigDict({"generator_fraction": 0.25, "temperature": 1.0})


@flax.struct.dataclass
class ElectraOutputs:
  """What the objectives read: mlm_logits [B, P, V] the generator's at the masked
  positions; rtd_logits [B, T] the discriminator's on the corrupted input; rtd_labels
  int [B, T] 1 where that input was replaced; corrupted_ids int [B, T] the input itself."""
  mlm_logits: jax.Array
  rtd_logits: jax.Array
  rtd_labels: jax.Array
  corrupted_ids: jax.Array
  sentence_logits: Optional[dict] = None


class ElectraTask(PretrainingTask):
  """Generator + discriminator pretraining; see the module docstring."""

  name = "electra"

  def __init__(self, config, model_config):
    super().__init__(config, model_config)
    names = {objective.name for objective, _ in self.objectives}
    if "rtd" not in names:
      raise ValueError(f"config.task=electra: config.objectives={config.objectives!r} has no "
                       "rtd term (ELECTRA: mlm:1,rtd:50)")
    if self.teacher is not None or any(o.sentence_head for o, _ in self.objectives):
      raise ValueError(f"config.task=electra: config.objectives={config.objectives!r} must be "
                       "ELECTRA's (mlm, rtd): no teacher or sentence head")
    fields = config.get("electra") or default_config()
    self.generator_fraction = float(fields.generator_fraction)
    self.temperature = float(fields.temperature)
    if not 0 < self.generator_fraction <= 1 or self.temperature <= 0:
      raise ValueError(f"config.electra: generator_fraction={self.generator_fraction} must be "
                       f"in (0, 1] and temperature={self.temperature} > 0")
    self.metric_names = ("loss", "mlm_loss", "mlm_accuracy", "rtd_loss", "rtd_accuracy",
                         "rtd_baseline_accuracy", "rtd_replaced_accuracy", "rtd_precision",
                         "rtd_replaced_prob", "rtd_original_prob")

  def model_spec(self) -> dict:
    return {"headed_model": "electra_pretraining",
            "generator_fraction": self.generator_fraction}

  def forward(self, model, params, batch, *, deterministic: bool, rng=None,
              frozen=None) -> PretrainingForward:
    del frozen  # ELECTRA reads no frozen params
    if "segment_ids" in batch:
      raise ValueError("config.data.packing: ELECTRA's generator and discriminator read "
                       "unpacked rows; set it to False")
    variables = {"params": params}
    rngs = None if deterministic else {"dropout": rng}
    sampling = (jax.random.key(_EVAL_SAMPLING_KEY) if deterministic
                else jax.random.fold_in(rng, 1))
    generated = model.apply(variables, batch["input_ids"], batch["token_type_ids"],
                            batch["attention_mask"], batch["masked_lm_positions"],
                            deterministic=deterministic, rngs=rngs, method="generate")
    corrupted, labels = rtd.replace_tokens(
        sampling, generated.mlm_logits, batch["input_ids"], batch["attention_mask"],
        batch["masked_lm_positions"], batch["masked_lm_ids"], batch["masked_lm_weights"],
        self.temperature)
    args = (corrupted, batch["token_type_ids"], batch["attention_mask"])
    guidance_loss = None
    if self.guidance is None or deterministic:
      discriminated = model.apply(variables, *args, deterministic=deterministic, rngs=rngs,
                                  method="discriminate")
    else:  # attention guidance pulls the discriminator's heads (as pretrain/task.py)
      discriminated, state = model.apply(variables, *args, deterministic=False, rngs=rngs,
                                         method="discriminate", mutable=["intermediates"])
      probs = attention_probs(state["intermediates"], self.model_config.num_hidden_layers)
      guidance_loss = self.guidance.loss_sum(probs, batch["attention_mask"])
    return PretrainingForward(ElectraOutputs(
        mlm_logits=generated.mlm_logits, rtd_logits=discriminated.logits, rtd_labels=labels,
        corrupted_ids=corrupted), guidance_loss)

  def step_flops(self, batch) -> float:
    """Generator (MLM at the masked positions) plus discriminator (every token)."""
    rows, seq_len = batch["input_ids"].shape
    generator = generator_config(self.model_config, self.generator_fraction)
    return (flops.pretraining_step_flops(generator, rows, seq_len,
                                         batch["masked_lm_positions"].shape[1])
            + 3.0 * flops.encoder_forward_flops(self.model_config, rows, seq_len))
