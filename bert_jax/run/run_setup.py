"""A run's setup, before it reads data or the workdir: the task's model and optimizer on a
device mesh, the shardings of the train state, and the jitted train step.

The trainer (bert_jax/run/trainer.py) trains with it, and `--compile_only`
(bert_jax/run/compile_report.py) compiles its step from abstract shapes; both build the
step with `Setup.jit_train_step`, so the step a plan measures is the step a run takes.

  setup = build(config, task, total_steps, devices)
  state = setup.fresh_state()                  # params and optimizer state, in their shardings
  step = setup.jit_train_step()                # (state, batch, frozen) -> (state, metrics)
  step.lower(*setup.step_structs(batch_size))  # compile-only: nothing is allocated
"""
import contextlib
import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from bert_jax import weights
from bert_jax.core import optim
from bert_jax.core.task import FrozenParams, Task
from bert_jax.models.config import BertConfig
from bert_jax.run import sharding
from bert_jax.run.steps import SelectingTrainState, TrainState, make_train_step
from bert_jax.run.tasks import make_task


def _structs(tree, shardings):
  """ShapeDtypeStructs of `tree`'s leaves, each with its sharding."""
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                      tree, shardings)


@dataclasses.dataclass(frozen=True)
class Setup:
  """Everything about the model that does not depend on data or the workdir."""
  task: Task
  model_config: BertConfig
  model: nn.Module
  tx: optax.GradientTransformation  # the configured optimizer as the task trains (task.freeze)
  schedule: optax.Schedule
  grad_accum_steps: int  # micro-batches per optimizer update
  mesh: jax.sharding.Mesh
  rules: tuple
  init_state: Callable[[jax.Array], TrainState]  # rng -> boxed TrainState
  abstract_state: TrainState  # unboxed ShapeDtypeStructs
  state_sharding: TrainState
  frozen: FrozenParams | None  # what the step reads untrained (task.frozen_params())
  frozen_abstract: dict | None  # their unboxed ShapeDtypeStructs (None without, or not in_step)
  frozen_sharding: dict | None  # their NamedShardings (None without, or not in_step)
  batch_sharding: jax.sharding.NamedSharding
  init_rng: jax.Array
  dropout_rng: jax.Array

  @property
  def replicated(self) -> jax.sharding.NamedSharding:
    """A whole copy on every device of the mesh (the step's metrics, scalars)."""
    return jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())

  @contextlib.contextmanager
  def on_mesh(self):
    """The mesh and the logical-axis rules: the context a step is traced and run in."""
    with jax.set_mesh(self.mesh), nn.logical_axis_rules(self.rules):
      yield

  def fresh_state(self) -> TrainState:
    """The initialised train state, made directly in its shardings."""
    with self.on_mesh():
      return jax.jit(lambda r: nn.unbox(self.init_state(r)),
                     out_shardings=self.state_sharding)(self.init_rng)

  def jit_train_step(self):
    """The jitted train step, (state, batch, frozen) -> (state, metrics): the state donated
    and kept in state_sharding, the batch in batch_sharding, the metrics replicated."""
    step = make_train_step(self.task, self.model, self.tx, self.schedule,
                           self.grad_accum_steps, self.dropout_rng)
    return jax.jit(step, in_shardings=(self.state_sharding, self.batch_sharding,
                                       self.frozen_sharding),
                   out_shardings=(self.state_sharding, self.replicated), donate_argnums=0)

  def step_structs(self, batch_size: int) -> tuple:
    """(state, batch, frozen) of a global batch of batch_size as ShapeDtypeStructs in their
    shardings, to lower the train step without allocating anything (frozen: None where the
    step reads no frozen params)."""
    batch = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                        sharding=self.batch_sharding),
                         self.task.example_batch(batch_size))
    frozen = (None if self.frozen_abstract is None  # a distillation teacher
              else _structs(self.frozen_abstract, self.frozen_sharding))
    return _structs(self.abstract_state, self.state_sharding), batch, frozen

  def place_frozen(self, host_params: dict) -> dict:
    """The task's frozen host params on the mesh; their tree must be the frozen model's."""
    shardings = self.frozen_sharding
    if jax.tree.structure(shardings) != jax.tree.structure(host_params):
      raise ValueError(f"the frozen params (e.g. a distillation teacher) are not their "
                       f"model's: {sorted(host_params)} vs {sorted(shardings)} at the top")
    return jax.tree.map(lambda x, s: jax.device_put(np.asarray(x, np.float32), s),
                        host_params, shardings)


def resolve_model_config(config: ml_collections.ConfigDict,
                         source: weights.Pretrained | None = None) -> BertConfig:
  """config.model in full (it has vocab_size), or init_from's config + config.model fields
  (source: init_from already resolved)."""
  fields = dict(config.model)
  if "vocab_size" in fields:
    return BertConfig(**fields)
  if not config.init_from:
    raise ValueError("config.model does not give the architecture (no vocab_size) and "
                     "config.init_from is empty: set one of them")
  return weights.load_config(source or config.init_from).replace(**fields)


def build(config: ml_collections.ConfigDict, task: Task | None = None,
          total_steps: int | None = None, devices=None) -> Setup:
  """Task, mesh, model, optimizer and the shardings of the train state, from the config.

  devices: those of the mesh (default: jax.devices()); a TPU or GPU target's
  (bert_jax.run.targets) to compile for it without the hardware.
  """
  if task is None:
    task = make_task(config, resolve_model_config(config))
  model_config = task.model_config
  mesh = sharding.make_mesh(config.mesh, devices)
  rules = sharding.rules_from_config(config.logical_axis_rules)
  accum = int(config.grad_accum_steps)
  if config.data.batch_size % (accum * jax.process_count()):
    raise ValueError(f"config.data.batch_size={config.data.batch_size} must divide by "
                     f"grad_accum_steps x processes = {accum * jax.process_count()}")
  model = task.build_model()
  tx, schedule = optim.make_optimizer(config.optim, total_steps or int(config.num_train_steps))
  tx = task.freeze(tx)

  def init_params(module, rng):
    example = task.example_batch(batch_size=1)
    return module.init({"params": rng}, example["input_ids"], example["token_type_ids"],
                       example["attention_mask"])["params"]

  def init_state(rng):
    params = init_params(model, rng)
    fields = dict(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))
    if not config.data.get("select_fraction"):
      return TrainState(**fields)
    return SelectingTrainState(**fields, best_params=params, best_score=jnp.float32(-jnp.inf),
                               best_step=jnp.zeros((), jnp.int32))

  init_rng, dropout_rng = jax.random.split(jax.random.key(config.seed))
  with jax.set_mesh(mesh):  # traced for the mesh's platform (a target's, not the host's)
    abstract_boxed = jax.eval_shape(init_state, init_rng)
  state_sharding = sharding.state_shardings(abstract_boxed, mesh, rules)
  frozen, frozen_abstract, frozen_sharding = task.frozen_params(), None, None
  if frozen is not None and frozen.in_step:
    with jax.set_mesh(mesh):
      frozen_boxed = jax.eval_shape(lambda r: init_params(frozen.model, r), init_rng)
    frozen_abstract = nn.unbox(frozen_boxed)
    frozen_sharding = sharding.state_shardings(frozen_boxed, mesh, rules)
  return Setup(task=task, model_config=model_config, model=model, tx=tx, schedule=schedule,
               grad_accum_steps=accum, mesh=mesh, rules=rules, init_state=init_state,
               abstract_state=nn.unbox(abstract_boxed), state_sharding=state_sharding,
               frozen=frozen, frozen_abstract=frozen_abstract, frozen_sharding=frozen_sharding,
               batch_sharding=sharding.batch_sharding(mesh, rules), init_rng=init_rng,
               dropout_rng=dropout_rng)
