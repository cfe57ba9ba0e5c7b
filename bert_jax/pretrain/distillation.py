"""DistilBERT's knowledge distillation (Sanh et al. 2019): a frozen teacher read on every
batch, a student started from chosen teacher layers, and two loss terms beside MLM.

config.distillation (`default_config()`):
  teacher         an HF folder, TF checkpoint or bert_jax workdir with an MLM head. Its
                  params are constants of the step (bert_jax/core/task.py FrozenParams): no
                  gradient, no optimizer state, not checkpointed; a resumed run reads
                  them from this path again. The teacher runs in eval mode (no dropout)
                  on the student's masked batch.
  student_layers  "0,2,4,7,9,11" (DistilBERT's choice from BERT-Base): a fresh run
                  starts student layer i as teacher layer student_layers[i], and every
                  other student param the teacher has under the same name and shape
                  (embeddings, MLM head) as the teacher's; "" = a fresh student.
  temperature     T of the soft targets (DistilBERT: 2).

Loss terms (objectives.OBJECTIVES, weights from config.objectives; DistilBERT's recipe is
"distill:5,mlm:2,cosine:1", its alpha_ce / alpha_mlm / alpha_cos):
  distill  T^2 * KL(softmax(teacher / T) || softmax(student / T)) at the masked positions,
           divided by their count (HF distiller's loss_ce with restrict_ce_to_mask: a
           "batchmean" KL over the selected positions); logged distill_loss, and
           distill_accuracy = the share of them where the student's top guess is the
           teacher's.
  cosine   1 - cos(student, teacher) of the last hidden states, averaged over real tokens
           (torch's CosineEmbeddingLoss with target 1; needs equal hidden sizes).

Shape legend: B batch, T length, H hidden, P masked positions, V vocab.
"""
from typing import Optional

import flax.linen as nn
import flax.struct
import flax.traverse_util
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from bert_jax import weights
from bert_jax.models import specs
from bert_jax.models.config import BertConfig
from bert_jax.models.headed import PreTrainingOutput
from bert_jax.core.task import FrozenParams

_EPS = 1e-12  # torch's CosineEmbeddingLoss epsilon (inside the square roots)


def default_config() -> ml_collections.ConfigDict:
  """config.distillation with its defaults (see the module docstring)."""
  return ml_collections.ConfigDict({"teacher": "", "student_layers": "", "temperature": 2.0})


@flax.struct.dataclass
class WithTeacher(PreTrainingOutput):
  """The student's outputs plus the teacher's on the same batch (what the terms read).

  teacher: the teacher's PreTrainingOutput (mlm_logits [B, P, V], sequence_output
  [B, T, H]), gradient-free. temperature: T of the soft targets.
  """
  teacher: Optional[PreTrainingOutput] = None
  temperature: float = flax.struct.field(pytree_node=False, default=2.0)


def parse_layers(spec: str, student_layers: int, teacher_layers: int) -> tuple[int, ...]:
  """"0,2,4" -> (0, 2, 4): one teacher layer per student layer, each in range."""
  try:
    layers = tuple(int(x) for x in spec.split(","))
  except ValueError:
    raise ValueError(f"config.distillation.student_layers={spec!r}: expected comma-separated "
                     "teacher layer indices like 0,2,4,7,9,11") from None
  if len(layers) != student_layers:
    raise ValueError(f"config.distillation.student_layers={spec!r} names {len(layers)} "
                     f"teacher layers; the student has {student_layers}")
  if any(not 0 <= i < teacher_layers for i in layers):
    raise ValueError(f"config.distillation.student_layers={spec!r}: the teacher has layers "
                     f"0..{teacher_layers - 1}")
  return layers


def student_from_teacher(student: dict, teacher: dict, layers: tuple[int, ...]):
  """(student params started from the teacher, notes): student `layer_i` <- teacher
  `layer_{layers[i]}`; every other student param the teacher has by name (embeddings, the
  MLM head) is the teacher's; the rest (e.g. a pooler the teacher lacks) stays fresh."""
  theirs = flax.traverse_util.flatten_dict(teacher)
  out, fresh = {}, []
  for path, value in flax.traverse_util.flatten_dict(student).items():
    source = tuple(f"layer_{layers[int(k[len('layer_'):])]}"
                   if i and path[i - 1] == "encoder" and k.startswith("layer_") else k
                   for i, k in enumerate(path))
    if source not in theirs:
      out[path] = value
      fresh.append("/".join(path))
      continue
    if np.shape(theirs[source]) != np.shape(value):
      raise ValueError(f"config.distillation.student_layers: student {'/'.join(path)} has "
                       f"shape {np.shape(value)}, the teacher's {'/'.join(source)} "
                       f"{np.shape(theirs[source])} (the student needs the teacher's widths)")
    out[path] = np.asarray(theirs[source], np.float32)
  notes = [f"student layers <- teacher layers {list(layers)}"]
  if fresh:
    notes.append(f"newly initialised {sorted({p.rsplit('/', 1)[0] for p in fresh})}")
  return flax.traverse_util.unflatten_dict(out), notes


def _prune_like(params: dict, like: dict, path: str) -> dict:
  """`params` restricted to the keys of `like` (e.g. without a sentence head the teacher
  model does not run); a key `like` has and `params` lacks is an error."""
  if not isinstance(like, dict):
    return params
  missing = sorted(set(like) - set(params))
  if missing:
    raise ValueError(f"config.distillation.teacher={path}: has no {missing}")
  return {k: _prune_like(params[k], like[k], path) for k in like}


def teacher_for(config, student_config: BertConfig, needed: bool) -> Optional["Teacher"]:
  """The run's Teacher when an objective reads one (needed), or when only the student's
  start does (student_layers without distill / cosine: the teacher is read once, to
  initialise, and never run in the step); None otherwise."""
  fields = config.get("distillation")
  if needed or (fields is not None and fields.student_layers):
    return Teacher(config, student_config, in_step=needed)
  return None


class Teacher:
  """The frozen teacher of config.distillation and how its outputs join the student's."""

  def __init__(self, config, student_config: BertConfig, in_step: bool = True):
    fields = config.get("distillation")
    if fields is None or not fields.teacher:
      needs = (f"config.objectives={config.objectives!r}" if in_step else
               f"config.distillation.student_layers={fields.student_layers!r}")
      raise ValueError(f"{needs} needs a teacher: set config.distillation.teacher to an HF "
                       "folder or bert_jax workdir")
    self.in_step = in_step
    self.path, self.temperature = fields.teacher, float(fields.temperature)
    if self.temperature <= 0:
      raise ValueError(f"config.distillation.temperature={self.temperature}: must be > 0")
    # Its config only: a compile (--compile_only, bench/target_plan.py) never reads the
    # weights, so a folder holding only config.json compiles; `load` checks them.
    self.source = weights.resolve(self.path, check_weights=False)
    self.config = self.source.config.replace(
        scan_layers=False, remat_policy="none", dtype=student_config.dtype)
    if self.config.vocab_size != student_config.vocab_size:
      raise ValueError(f"config.distillation.teacher={self.path}: vocab_size "
                       f"{self.config.vocab_size} != the student's {student_config.vocab_size}")
    self.model = specs.build(self.config, {"headed_model": "pretraining",
                                                "sentence_heads": []})
    self.layers = None
    if fields.student_layers:
      if student_config.scan_layers:
        raise ValueError("config.distillation.student_layers needs config.model.scan_layers"
                         "=false (the student's layers are copied one by one)")
      self.layers = parse_layers(fields.student_layers, student_config.num_hidden_layers,
                                 self.config.num_hidden_layers)

  def load(self) -> dict:
    """The teacher's float32 host params, as `self.model` holds them."""
    try:
      weights.resolve(self.path)  # the weights files there and whole
    except (FileNotFoundError, ValueError) as e:
      raise ValueError(f"config.distillation.teacher={self.path}: no weights to train "
                       f"with ({e})") from None
    _, params, with_heads = weights.load_params(self.source)
    if not with_heads:
      raise ValueError(f"config.distillation.teacher={self.path}: has no MLM head (a "
                       "pretraining checkpoint is needed for the soft targets)")
    like = jax.eval_shape(lambda: self.model.init(
        jax.random.key(0), jnp.zeros((1, 1), jnp.int32)))["params"]
    return jax.tree.map(lambda x: np.asarray(x, np.float32),
                        _prune_like(params, nn.unbox(like), self.path))

  def frozen_params(self) -> FrozenParams:
    init = None
    if self.layers is not None:
      init = lambda student, teacher: student_from_teacher(student, teacher, self.layers)  # noqa: E731
    return FrozenParams(model=self.model, load=self.load, init_trainable=init,
                        in_step=self.in_step)

  def attach(self, student: PreTrainingOutput, params, batch) -> WithTeacher:
    """The student's outputs with the teacher's on the same (masked) batch."""
    teacher = self.model.apply({"params": jax.lax.stop_gradient(params)},
                               batch["input_ids"], batch["token_type_ids"],
                               batch["attention_mask"], batch["masked_lm_positions"],
                               deterministic=True)
    teacher = jax.lax.stop_gradient(teacher)
    fields = {k: getattr(student, k) for k in ("sequence_output", "pooled_output",
                                               "mlm_logits", "sentence_logits",
                                               "hidden_states")}
    return WithTeacher(**fields, teacher=teacher, temperature=self.temperature)


# ------------------------------------------------------------------------- loss terms
def distill_sums(outputs: WithTeacher, batch):
  t = outputs.temperature
  weights_ = batch["masked_lm_weights"].astype(jnp.float32)  # [B, P]
  student = jax.nn.log_softmax(outputs.mlm_logits.astype(jnp.float32) / t)  # [B, P, V]
  teacher = jax.nn.log_softmax(outputs.teacher.mlm_logits.astype(jnp.float32) / t)
  kl = jnp.sum(jnp.exp(teacher) * (teacher - student), axis=-1)  # [B, P]
  agree = (jnp.argmax(student, -1) == jnp.argmax(teacher, -1)).astype(jnp.float32)
  return {"distill_loss": t * t * jnp.sum(kl * weights_),
          "distill_correct": jnp.sum(agree * weights_)}


def distill_denominators(batch):
  return {"distill": jnp.maximum(jnp.sum(batch["masked_lm_weights"].astype(jnp.float32)),
                                 1.0)}


def distill_metrics(sums, denominators):
  return {"distill_loss": sums["distill_loss"] / denominators["distill"],
          "distill_accuracy": sums["distill_correct"] / denominators["distill"]}


def cosine_sums(outputs: WithTeacher, batch):
  student = outputs.sequence_output.astype(jnp.float32)  # [B, T, H]
  teacher = outputs.teacher.sequence_output.astype(jnp.float32)
  if student.shape != teacher.shape:
    raise ValueError(f"objective cosine: student hidden states {student.shape} and the "
                     f"teacher's {teacher.shape} differ (it needs equal hidden sizes)")
  cos = jnp.sum(student * teacher, -1) / jnp.sqrt(
      (jnp.sum(student * student, -1) + _EPS) * (jnp.sum(teacher * teacher, -1) + _EPS))
  real = batch["attention_mask"].astype(jnp.float32)  # [B, T]
  return {"cosine_loss": jnp.sum((1.0 - cos) * real)}


def cosine_denominators(batch):
  return {"cosine": jnp.maximum(jnp.sum(batch["attention_mask"].astype(jnp.float32)), 1.0)}


def cosine_metrics(sums, denominators):
  return {"cosine_loss": sums["cosine_loss"] / denominators["cosine"]}
