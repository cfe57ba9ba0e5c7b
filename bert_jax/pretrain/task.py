"""The pretraining task (bert_jax/core/task.py's contract): the objectives of config.objectives
on the batches of bert_jax/pretrain/pipeline.py.

The model is BertForPreTraining with the heads its objectives read (the NSP head exists only
when "nsp" is on, the span boundary head only when "sbo" is; then the batches carry the
span fields). The logged `loss` is the weighted sum of the objectives;
attention guidance, when on, is added to what is differentiated and logged apart as
`attention_guidance_loss`. Objectives that read a teacher (distill, cosine) make the
task load config.distillation.teacher as frozen params (distillation.py) and run it on
every batch beside the model.
"""
import sys
from typing import Optional

import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.core import flops
from bert_jax.core import packed_rows
from bert_jax.models import specs
from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.layers import attention_probs
from bert_jax.models.headed import PreTrainingOutput
from bert_jax.pretrain import attention_guidance
from bert_jax.pretrain import masking
from bert_jax.pretrain import distillation
from bert_jax.pretrain import objectives as objectives_lib
from bert_jax.pretrain import pipeline
from bert_jax.pretrain import shards
from bert_jax.core.task import Evaluation, TaskInputs

@flax.struct.dataclass
class PretrainingForward:
  """What `forward` gives `loss_sums`: the model's outputs, plus the summed attention
  guidance term when that is on (training steps only)."""
  outputs: PreTrainingOutput
  guidance_loss: Optional[jax.Array] = None


def _say_if_static_masking_never_repeats(config, train) -> None:
  """Static masking (data.dupe_factor N) differs from dynamic only once an epoch repeats,
  i.e. in runs of more than N epochs: a shorter run says so (one line) instead of silently
  measuring dynamic masking under a static name."""
  copies = int(config.data.get("dupe_factor", 0))
  if copies <= 0:
    return
  per_epoch = train.steps_in_epoch(0)
  epochs = config.num_train_steps / max(per_epoch, 1)
  if epochs <= copies:
    print(f"static masking: config.data.dupe_factor={copies} but num_train_steps="
          f"{config.num_train_steps} read {epochs:.1f} epochs of {per_epoch} batches, so no "
          "epoch repeats and every mask is new, as with dynamic masking (dupe_factor=0)",
          file=sys.stderr)


class PretrainingTask:
  """Pretraining on the prepared corpus; see the module docstring."""

  name = "pretraining"
  label_names = None
  counts_in_steps = True  # the stream has no fixed epoch
  source = None  # config.init_from resolved (Task.source; set by make_task)

  def __init__(self, config, model_config: BertConfig):
    self.config, self.model_config = config, model_config
    self.objectives = objectives_lib.parse(config.objectives)
    for objective, _ in self.objectives:
      if objective.task not in (None, self.name):
        raise ValueError(f"config.objectives={config.objectives!r}: {objective.name} needs "
                         f"config.task={objective.task!r} (this is {self.name!r})")
    pipeline.check_builder_makes(config.data, {field for objective, _ in self.objectives
                                               for field in objective.label_fields})
    if config.data.get("packing") and not family_of(model_config).packed_rows:
      raise ValueError(f"config.data.packing: the {model_config.family} family's attention "
                       "takes no packed rows (segment ids); set --config.data.packing=false")
    self.metric_names = ("loss",) + tuple(
        f"{objective.name}_{kind}" for objective, _ in self.objectives
        for kind in ("loss", "accuracy"))
    self.guidance = attention_guidance.from_config(
        config, model_config.num_hidden_layers, model_config.num_attention_heads)
    if self.guidance is not None and config.data.get("packing"):
      raise ValueError("config.data.packing=True: attention guidance's patterns are per row, "
                       "not per packed example; set config.attention_guidance.weight=0")
    if self.guidance is not None and model_config.attention_impl != "einsum":
      raise ValueError(
          f"config.attention_guidance.weight={self.guidance.weight} (an auxiliary loss on "
          "the attention probabilities, an aid for small models) needs them, and "
          f"attention_impl={model_config.attention_impl!r} does not give them: set "
          "--config.attention_guidance.weight=0 (as at paper scale), or "
          "--config.model.attention_impl=einsum")
    self.span_head = any(objective.span_head for objective, _ in self.objectives)
    self.teacher = distillation.teacher_for(config, model_config,
                                            any(o.teacher for o, _ in self.objectives))

  def model_spec(self) -> dict:
    spec = {"headed_model": "pretraining",
            "sentence_heads": [o.sentence_head for o, _ in self.objectives if o.sentence_head]}
    if self.span_head:
      spec["span_boundary_head"] = True
    return spec

  def build_model(self):
    return specs.build(self.model_config, self.model_spec())

  def make_inputs(self, tokenizer, process_index: int, process_count: int) -> TaskInputs:
    # config.data.shards: pre-tokenized shard files, masked in numpy (no TensorFlow).
    make = shards.make_inputs if self.config.data.get("shards") else pipeline.make_inputs
    train, evaluation = make(self.config.data, process_index=process_index,
                             process_count=process_count, tokenizer=tokenizer,
                             span_fields=self.span_head)
    _say_if_static_masking_never_repeats(self.config, train)
    return TaskInputs(train=train, eval=evaluation)

  def example_batch(self, batch_size: int):
    """Zeros of the batch contract's shapes, for init and compile-only runs."""
    data = self.config.data
    t, p = data.max_seq_length, data.max_predictions_per_seq
    batch = {
        "input_ids": jnp.zeros((batch_size, t), jnp.int32),
        "token_type_ids": jnp.zeros((batch_size, t), jnp.int32),
        "attention_mask": jnp.ones((batch_size, t), jnp.int32),
        "masked_lm_positions": jnp.zeros((batch_size, p), jnp.int32),
        "masked_lm_ids": jnp.zeros((batch_size, p), jnp.int32),
        "masked_lm_weights": jnp.zeros((batch_size, p), jnp.float32),
    }
    for field in pipeline.builder_for(data).label_fields:
      batch[field] = jnp.zeros((batch_size,), jnp.int32)
    if self.span_head:
      for field in masking.SPAN_FIELDS:
        batch[field] = jnp.zeros((batch_size, p), jnp.int32)
    return batch

  def freeze(self, tx):
    return tx  # pretraining trains every param of its state

  def frozen_params(self):
    return None if self.teacher is None else self.teacher.frozen_params()

  def forward(self, model, params, batch, *, deterministic: bool, rng=None,
              frozen=None) -> PretrainingForward:
    rngs = None if deterministic else {"dropout": rng}
    args = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
            batch["masked_lm_positions"])
    kwargs = {"masked_lm_spans": tuple(batch[f"masked_lm_span_{k}"]
                                       for k in ("left", "right", "offset"))
              } if self.span_head else {}
    if "segment_ids" in batch:  # packed rows (config.data.packing)
      if frozen is not None:
        raise ValueError("config.data.packing: distillation's teacher reads unpacked rows")
      kwargs["packing"] = {k: batch[k] for k in packed_rows.PACKING_KEYS if k in batch}
    guidance_loss = None
    if self.guidance is None or deterministic:
      outputs = model.apply({"params": params}, *args, deterministic=deterministic, rngs=rngs,
                            **kwargs)
    else:
      outputs, state = model.apply({"params": params}, *args, deterministic=False, rngs=rngs,
                                   mutable=["intermediates"], **kwargs)
      probs = attention_probs(state["intermediates"], self.model_config.num_hidden_layers)
      guidance_loss = self.guidance.loss_sum(probs, batch["attention_mask"])
    if frozen is not None:  # the teacher's outputs on the same batch (distillation.py)
      outputs = self.teacher.attach(outputs, frozen, batch)
    return PretrainingForward(outputs, guidance_loss)

  def loss_sums(self, forward: PretrainingForward, batch) -> dict[str, jax.Array]:
    sums = {}
    for objective, _ in self.objectives:
      sums.update(objective.sums(forward.outputs, batch))
    if forward.guidance_loss is not None:
      sums["attention_guidance_loss"] = forward.guidance_loss
    return sums

  def denominators(self, batch) -> dict[str, jax.Array]:
    denominators = {}
    for objective, _ in self.objectives:
      denominators.update(objective.denominators(batch))
    if self.guidance is not None:
      denominators["attention_guidance"] = jnp.maximum(
          self.guidance.count(batch["attention_mask"]), 1.0)
    return denominators

  def _objective_loss(self, sums, denominators) -> jax.Array:
    return sum(weight * objective.loss(sums, denominators)
               for objective, weight in self.objectives)

  def loss(self, sums, denominators) -> jax.Array:
    loss = self._objective_loss(sums, denominators)
    if "attention_guidance_loss" in sums:
      loss += (self.guidance.weight * sums["attention_guidance_loss"]
               / denominators["attention_guidance"])
    return loss

  def metrics(self, sums, denominators) -> dict[str, jax.Array]:
    metrics = {"loss": self._objective_loss(sums, denominators)}
    for objective, _ in self.objectives:
      metrics.update(objective.metrics(sums, denominators))
    if "attention_guidance_loss" in sums:  # reported apart: `loss` is the objectives'
      metrics["attention_guidance_loss"] = (sums["attention_guidance_loss"]
                                            / denominators["attention_guidance"])
    return metrics

  def step_flops(self, batch) -> float:
    """Model FLOPs of one training step on this batch: the model's forward and backward, and
    a distillation teacher's forward where the step runs one."""
    rows, seq_len = batch["input_ids"].shape
    predictions = batch["masked_lm_positions"].shape[1]
    total = flops.pretraining_step_flops(self.model_config, rows, seq_len, predictions)
    if self.teacher is not None and self.teacher.in_step:
      total += flops.mlm_forward_flops(self.teacher.config, rows, seq_len, predictions)
    return total

  def eval_outputs(self, outputs, batch):
    return self.loss_sums(outputs, batch), self.denominators(batch)

  def evaluate(self, run_eval, inputs: TaskInputs) -> Evaluation:
    """Every objective's loss and accuracy over the held-out batches (config.eval_batches,
    0 = all)."""
    sums = denominators = None
    for i, local in enumerate(inputs.eval.epoch_batches(0)):
      if self.config.eval_batches and i >= self.config.eval_batches:
        break
      s, d = run_eval(local)
      sums = s if sums is None else jax.tree.map(jnp.add, sums, s)
      denominators = d if denominators is None else jax.tree.map(jnp.add, denominators, d)
    if sums is None:
      return Evaluation(metrics={})
    return Evaluation(metrics={k: float(v) for k, v in self.metrics(sums, denominators).items()})

  def write_predictions(self, evaluation, inputs, workdir):
    return None  # pretraining has no prediction format

  def tokens(self, batch) -> int:
    return int(batch["input_ids"].size)
