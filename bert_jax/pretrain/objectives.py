"""Pretraining loss terms, by name: `config.objectives = "mlm,nsp"` (optionally "name:weight").

Each term reads the model's outputs and the batch and gives additive sums plus the whole
batch's denominators (so gradient accumulation stays exact), its training metrics, and
what it needs: a sentence-level head on the model and label fields from the example
builder. The logged `loss` is the weighted sum of the terms; each term's own loss and
accuracy are logged apart (`<name>_loss`, `<name>_accuracy`).

A new term is one `Objective(...)` in OBJECTIVES; the stream and the trainer do not change.
"""
import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

from bert_jax.core.losses import xent_sums
from bert_jax.pretrain import distillation
from bert_jax.pretrain import rtd


@dataclasses.dataclass(frozen=True)
class Objective:
  """One loss term.

  sums(outputs, batch) -> {name: sum}; denominators(batch) -> {name: count};
  metrics(sums, denominators) -> {metric: value}, the term's own loss under
  f"{name}_loss". sentence_head: the 2-way pooled head it reads from
  outputs.sentence_logits (None: none); label_fields: batch fields it reads that the
  example builder (or the masking, for the span fields) must make; span_head: it reads
  outputs.span_logits (the model carries the span boundary head); teacher: it reads
  `outputs.teacher`, the frozen config.distillation.teacher run on the same batch
  (distillation.py); task: the config.task whose model gives the outputs it reads (None:
  any pretraining task).
  """
  name: str
  sums: Callable[..., dict]
  denominators: Callable[..., dict]
  metrics: Callable[..., dict]
  sentence_head: str | None = None
  label_fields: tuple[str, ...] = ()
  span_head: bool = False
  teacher: bool = False
  task: str | None = None

  def loss(self, sums, denominators) -> jax.Array:
    return self.metrics(sums, denominators)[f"{self.name}_loss"]


# ------------------------------------------------------------------------ masked LM
def _corrupted_weights(batch) -> jax.Array:
  """[B, P] float32: 1.0 at real predictions whose input token differs from the original."""
  observed = jnp.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], axis=1)
  changed = (observed != batch["masked_lm_ids"]).astype(jnp.float32)
  return batch["masked_lm_weights"].astype(jnp.float32) * changed


def _mlm_sums(outputs, batch):
  weights = batch["masked_lm_weights"].astype(jnp.float32)
  loss, correct = xent_sums(outputs.mlm_logits, batch["masked_lm_ids"], weights)
  _, corrupted_correct = xent_sums(outputs.mlm_logits, batch["masked_lm_ids"],
                                   _corrupted_weights(batch))
  return {"mlm_loss": loss, "mlm_correct": correct, "mlm_corrupted_correct": corrupted_correct}


def _mlm_denominators(batch):
  return {"mlm": jnp.maximum(jnp.sum(batch["masked_lm_weights"].astype(jnp.float32)), 1.0),
          "mlm_corrupted": jnp.maximum(jnp.sum(_corrupted_weights(batch)), 1.0)}


def _mlm_metrics(sums, denominators):
  # mlm_accuracy_corrupted: accuracy where the input token was replaced ([MASK] or
  # random), i.e. without the kept tokens a model gets right by copying its input.
  return {"mlm_loss": sums["mlm_loss"] / denominators["mlm"],
          "mlm_accuracy": sums["mlm_correct"] / denominators["mlm"],
          "mlm_accuracy_corrupted": (sums["mlm_corrupted_correct"]
                                     / denominators["mlm_corrupted"])}


# --------------------------------------------------- span boundary objective (SpanBERT)
def _sbo_sums(outputs, batch):
  weights = batch["masked_lm_weights"].astype(jnp.float32)
  loss, correct = xent_sums(outputs.span_logits, batch["masked_lm_ids"], weights)
  return {"sbo_loss": loss, "sbo_correct": correct}


def _sbo_metrics(sums, denominators):
  return {"sbo_loss": sums["sbo_loss"] / denominators["mlm"],
          "sbo_accuracy": sums["sbo_correct"] / denominators["mlm"]}


# ------------------------------------------------------------ sentence-level heads
def sentence_objective(name: str, label_field: str, head: str | None = None) -> Objective:
  """A 2-way classification of each example from its pooled [CLS] (NSP; SOP alike), read
  from the sentence head `head` (default: the term's own name).

  Label 0 is "B follows A" in both tasks (NSP: the true next segment; SOP: the original
  order), so a head trained on one task scores on the other's pairs as it stands: ALBERT's
  Table 5 cross columns, `nsp_on_sop` and `sop_on_nsp` below, run as an evaluation of a
  pretrained workdir (config.init_from, num_train_steps=0, the other task's builder).

  Packed rows (config.data.packing) hold K pairs each: logits [B, K, 2], labels [B, K] and
  example_mask [B, K] weigh the slots (0 = empty), so the loss and accuracy are the mean
  over the real pairs, as unpacked ([B, 2], [B])."""
  def weights(batch):
    if "example_mask" in batch:
      return batch["example_mask"].astype(jnp.float32)
    return jnp.ones(batch[label_field].shape, jnp.float32)

  def sums(outputs, batch):
    loss, correct = xent_sums(outputs.sentence_logits[head or name], batch[label_field],
                              weights(batch))
    return {f"{name}_loss": loss, f"{name}_correct": correct}

  def denominators(batch):
    return {name: jnp.maximum(jnp.sum(weights(batch)), 1.0)}

  def metrics(sums_, denominators_):
    return {f"{name}_loss": sums_[f"{name}_loss"] / denominators_[name],
            f"{name}_accuracy": sums_[f"{name}_correct"] / denominators_[name]}

  return Objective(name, sums, denominators, metrics, sentence_head=head or name,
                   label_fields=(label_field,))


OBJECTIVES = {
    "mlm": Objective("mlm", _mlm_sums, _mlm_denominators, _mlm_metrics,
                     label_fields=("masked_lm_positions", "masked_lm_ids",
                                   "masked_lm_weights")),
    "nsp": sentence_objective("nsp", "next_sentence_labels"),
    "sop": sentence_objective("sop", "sentence_order_labels"),  # ALBERT's sentence order
    # One task's head on the other's pairs (ALBERT's Table 5: an NSP head on SOP pairs).
    "nsp_on_sop": sentence_objective("nsp_on_sop", "sentence_order_labels", head="nsp"),
    "sop_on_nsp": sentence_objective("sop_on_nsp", "next_sentence_labels", head="sop"),
    # SpanBERT's: every masked token from its span's boundary tokens + its place in the span.
    "sbo": Objective("sbo", _sbo_sums, _mlm_denominators, _sbo_metrics, span_head=True,
                     label_fields=("masked_lm_ids", "masked_lm_weights", "masked_lm_span_left",
                                   "masked_lm_span_right", "masked_lm_span_offset")),
    # DistilBERT's soft targets and hidden-state cosine (distillation.py)
    "distill": Objective("distill", distillation.distill_sums, distillation.distill_denominators,
                         distillation.distill_metrics, label_fields=("masked_lm_positions",
                                                                     "masked_lm_weights"),
                         teacher=True),
    "cosine": Objective("cosine", distillation.cosine_sums, distillation.cosine_denominators,
                        distillation.cosine_metrics, teacher=True),
    # ELECTRA's replaced-token detection by the discriminator (rtd.py; task electra.py)
    "rtd": Objective("rtd", rtd.rtd_sums, rtd.rtd_denominators, rtd.rtd_metrics,
                     label_fields=("masked_lm_positions", "masked_lm_ids",
                                   "masked_lm_weights"), task="electra"),
}


def parse(spec: str) -> tuple[tuple[Objective, float], ...]:
  """"mlm,nsp" or "mlm:1,nsp:0.5" -> ((Objective, weight), ...); unknown names are errors."""
  terms = []
  for item in (part.strip() for part in spec.split(",")):
    if not item:
      continue
    name, _, weight = item.partition(":")
    if name not in OBJECTIVES:
      raise ValueError(f"config.objectives={spec!r}: unknown objective {name!r}; expected "
                       f"names from {sorted(OBJECTIVES)}")
    try:
      terms.append((OBJECTIVES[name], float(weight) if weight else 1.0))
    except ValueError:
      raise ValueError(f"config.objectives={spec!r}: weight {weight!r} of {name} is not a "
                       "number") from None
  if not terms:
    raise ValueError(f"config.objectives={spec!r} names no objective")
  if len({o.name for o, _ in terms}) != len(terms):
    raise ValueError(f"config.objectives={spec!r} names an objective twice")
  return tuple(terms)
