"""The task contract: all the trainer knows of what it trains.

A task is pretraining (bert_jax/pretrain/task.py) or a fine-tuning task
(bert_jax/finetune/<task>.py). The trainer builds one per run, from the run's config
and the resolved model config, and then only calls the members below; a task keeps no
state between calls (everything it needs later is in what it returned earlier).

Call order in a run (bert_jax/run/trainer.py; the setup in bert_jax/run/run_setup.py):
  task = TASKS[config.task](config, model_config)   # the registry: bert_jax/run/tasks.py
  model = task.build_model()                         # also what `model_spec()` describes
  tx = task.freeze(tx)                               # the run's optimizer, what it holds fixed
  frozen = task.frozen_params()                      # None, or what the step reads untrained
  inputs = task.make_inputs(tokenizer, process_index, process_count)
  per step (jitted):  outputs = task.forward(model, params, batch, ..., frozen=...)
                      sums = task.loss_sums(outputs, batch); d = task.denominators(batch)
                      grad of task.loss(sums, d); logged: task.metrics(sums, d)
  per eval:           evaluation = task.evaluate(run_eval, inputs)
                        (run_eval(batch) runs the jitted task.eval_outputs(forward(...)))
  at the end:         task.write_predictions(evaluation, inputs, workdir)

Losses are sums over examples / predictions, divided by the WHOLE batch's denominators, so
gradient accumulation over micro-batches equals the big batch (see trainer.py).
"""
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import flax.linen as nn
import jax
import numpy as np
import optax

Batch = dict[str, np.ndarray]  # one process's rows of a global batch (numpy, host side)


class Input(Protocol):
  """An endless, resumable iterator of local batches (pretrain/pipeline.py, finetune/array_input.py)."""

  def __next__(self) -> Batch: ...

  def state(self) -> dict:
    """This process's position (JSON); saved in every checkpoint beside the train state."""

  def restore(self, state: dict) -> None:
    """Continues from a saved `state()`: the next batches are an uninterrupted run's."""

  def epoch_batches(self, epoch: int) -> Iterator[Batch]:
    """The batches of one epoch, from its start, statelessly (evaluation reads these)."""


@dataclasses.dataclass(frozen=True)
class TaskInputs:
  """What `make_inputs` gives: the training input, the eval input and what scoring needs.

  steps_per_epoch: training batches in one epoch (fine-tuning counts its length in
    epochs); None where an epoch has no fixed length (pretraining counts steps).
  eval_metadata: whatever `evaluate` / `write_predictions` need besides the model's
    outputs (gold labels, SQuAD windows, CoNLL words); None when the task needs nothing.
  width_examples: one local batch of each shape the training batches can have (dynamic
    padding widths); the trainer compiles its step for each before the loop. Empty where
    every batch has one shape (compiled at the first step).
  select, select_metadata, select_metric: training examples held back to pick the epoch
    (config.data.select_fraction), what scoring them needs, and the metric of `evaluate`
    that picks (higher is better); select None: the run ends on its last step's params.
  predict, predict_metadata: an unlabelled split (a test file) that `evaluate` runs the
    model over beside the eval split, for `write_predictions` (config.predict), and what
    writing its predictions needs; None where there is none.
  data_notes: one line per file whose bad records reading skipped (skip_bad_rows), for
    the run report; () when none was.
  """
  train: Input
  eval: Input | None
  steps_per_epoch: int | None = None
  eval_metadata: Any = None
  width_examples: tuple[Batch, ...] = ()
  select: Input | None = None
  select_metadata: Any = None
  select_metric: str | None = None
  predict: Input | None = None
  predict_metadata: Any = None
  data_notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class FrozenParams:
  """Params a task's step reads but never trains (a distillation teacher).

  The trainer keeps them out of the train state (no gradient, no optimizer state, not
  checkpointed: a resumed run loads them again), places them on the mesh by `model`'s
  logical axes and hands them to every `forward` as `frozen`.

  model: the module they belong to (its init gives their shapes and shardings).
  load: () -> host params of `model` (float32 numpy), called once per run.
  init_trainable: (fresh trainable params, frozen host params) -> (params, notes): how a
    run that starts from scratch initialises the trained params from the frozen ones
    (DistilBERT's student from the teacher's layers); None: fresh initialisation.
  in_step: False when only init_trainable reads them (a student started from the
    teacher's layers with no teacher loss): the trainer loads them for that, and the
    steps get frozen=None (no teacher forward pass).
  """
  model: nn.Module
  load: Callable[[], dict]
  init_trainable: Callable[[dict, dict], tuple[dict, list[str]]] | None = None
  in_step: bool = True


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """metrics: {name: float} (the trainer prefixes eval_); outputs: the host-side arrays
  they were computed from, for `write_predictions`."""
  metrics: dict[str, float]
  outputs: dict[str, np.ndarray] | None = None


class Task(Protocol):
  """One training task. Constructed as `Task(config, model_config)`; both are fixed for
  the task's life (config: the run's ConfigDict; model_config: the encoder's config)."""

  name: str  # == config.task
  metric_names: tuple[str, ...]  # the training metrics printed in the run's last line
  # The classes the model's logits stand for, in order (e.g. SST-2's "0", "1"; CoNLL's tags),
  # recorded in model_config.json and written as an HF export's id2label; None: no classes.
  label_names: tuple[str, ...] | None
  # The run's length is config.num_train_steps only (a stream without a fixed epoch:
  # pretraining); False: num_train_epochs of the task's data may set it (fine-tuning).
  counts_in_steps: bool
  # config.init_from as the run resolved it (a bert_jax.weights.Pretrained, set by
  # make_task), for a task that reads its weights itself; None: none given.
  source: object | None

  def model_spec(self) -> dict:
    """{"headed_model": NAME, **kwargs}: the model in models/specs.HEADED_MODELS terms.

    Written to the workdir's model_config.json, so `weights.load_pretrained(workdir)`
    rebuilds exactly this model with its head.
    """

  def build_model(self) -> nn.Module:
    """The module to train: `specs.build(model_config, self.model_spec())`."""

  def example_batch(self, batch_size: int) -> dict[str, jax.Array]:
    """Zeros of the batch contract's shapes (init and compile-only runs)."""

  def make_inputs(self, tokenizer, process_index: int, process_count: int) -> TaskInputs:
    """Reads and featurizes the data with the run's one tokenizer; this process's share."""

  def freeze(self, tx: optax.GradientTransformation) -> optax.GradientTransformation:
    """The run's optimizer as this task trains with it: `tx` itself, or `tx` giving the
    params the task holds fixed no update (fine-tuning's config.freeze_encoder:
    core.optim.freeze). Those params stay in the train state and its checkpoints, unlike
    `frozen_params()`'s."""

  def frozen_params(self) -> FrozenParams | None:
    """What the step reads but does not train (a distillation teacher); None for most."""

  def forward(self, model: nn.Module, params, batch, *, deterministic: bool, rng=None,
              frozen=None):
    """The model's outputs on a batch (jitted; rng is the step's key when training:
    dropout, and any sampling the task does). frozen: the params `frozen_params()`
    loaded, on device (None without)."""

  def loss_sums(self, outputs, batch) -> dict[str, jax.Array]:
    """Additive sums over the batch's rows (losses, correct counts)."""

  def denominators(self, batch) -> dict[str, jax.Array]:
    """What the sums are divided by, counted over the whole batch."""

  def loss(self, sums, denominators) -> jax.Array:
    """The scalar that is differentiated."""

  def metrics(self, sums, denominators) -> dict[str, jax.Array]:
    """Training metrics logged every log_every_steps (`loss` among them)."""

  def eval_outputs(self, outputs, batch):
    """What one eval batch gives the host (jitted with forward, deterministic)."""

  def evaluate(self, run_eval: Callable[[Batch], Any], inputs: TaskInputs) -> Evaluation:
    """Runs `run_eval` over inputs.eval and scores the result (official metrics)."""

  def write_predictions(self, evaluation: Evaluation, inputs: TaskInputs,
                        workdir: str) -> str | None:
    """Writes the eval split's predictions in the task's submission format; the path
    (None where the task has no prediction format)."""

  def step_flops(self, batch) -> float:
    """Model FLOPs of one training step on this batch (for MFU)."""

  def tokens(self, batch) -> int:
    """Token positions in the batch (for tokens/s)."""
