"""The train state and the jitted steps the trainer runs (bert_jax/run/trainer.py).

  TrainState (step, params, opt_state); SelectingTrainState adds the params that scored
  best on held-back training examples (config.data.select_fraction) and keep_best updates
  them; make_train_step: (state, batch, frozen) -> (state, metrics: the loss terms,
  learning_rate, grad_norm; the trainer adds param_norm where it logs), one optimizer update
  over grad-accumulated micro-batches; make_eval_step: the deterministic forward whose
  outputs a task's evaluate() collects.
"""
import flax.struct
import jax
import jax.numpy as jnp
import optax


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: dict
  opt_state: optax.OptState


@flax.struct.dataclass
class SelectingTrainState(TrainState):
  """A run that picks its epoch (config.data.select_fraction): the params that scored
  best on the held-back examples so far ride in the checkpoint, so a resumed run picks
  the same epoch as an uninterrupted one."""
  best_params: dict
  best_score: jax.Array  # -inf before the first score
  best_step: jax.Array


def keep_best(state: SelectingTrainState, score) -> SelectingTrainState:
  """The state with its params kept as the best if `score` beats the best so far (NaN
  never does; a tie keeps the earlier step)."""
  better = score > state.best_score
  pick = lambda new, old: jnp.where(better, new, old)  # noqa: E731
  return state.replace(best_params=jax.tree.map(pick, state.params, state.best_params),
                       best_score=pick(score, state.best_score),
                       best_step=pick(state.step, state.best_step))


def tree_norm(tree):
  """The global L2 norm of a tree's leaves (in float32)."""
  return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree)))


def make_train_step(task, model, tx, schedule, accum: int, dropout_rng):
  """(state, batch, frozen) -> (state, metrics): one optimizer update over `accum`
  micro-batches; frozen: the task's untrained params on device (None without).

  Losses are the task's sums divided by the WHOLE batch's denominators, so accumulating
  micro-batch gradients gives the big batch's gradient (up to summation order).
  """
  def grads_and_sums(params, batch, rng, denominators, frozen):
    def loss_fn(p, micro, micro_rng):
      outputs = task.forward(model, p, micro, deterministic=False, rng=micro_rng,
                             frozen=frozen)
      sums = task.loss_sums(outputs, micro)
      return task.loss(sums, denominators), sums
    grad_fn = jax.grad(loss_fn, has_aux=True)
    if accum == 1:
      return grad_fn(params, batch, rng)
    # Micro-batch i takes rows i, i+k, i+2k, ...: each device keeps its own rows.
    micro = jax.tree.map(lambda x: x.reshape(-1, accum, *x.shape[1:]).swapaxes(0, 1), batch)
    first = jax.tree.map(lambda x: x[0], micro)
    sums_shape = jax.eval_shape(lambda: grad_fn(params, first, rng)[1])

    def body(carry, xs):
      grads, sums = carry
      micro_batch, i = xs
      g, s = grad_fn(params, micro_batch, jax.random.fold_in(rng, i))
      return (jax.tree.map(jnp.add, grads, g), jax.tree.map(jnp.add, sums, s)), None

    zeros = (jax.tree.map(jnp.zeros_like, params),
             jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), sums_shape))
    (grads, sums), _ = jax.lax.scan(body, zeros, (micro, jnp.arange(accum)))
    return grads, sums

  def train_step(state, batch, frozen=None):
    denominators = task.denominators(batch)
    step_rng = jax.random.fold_in(dropout_rng, state.step)
    grads, sums = grads_and_sums(state.params, batch, step_rng, denominators, frozen)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = task.metrics(sums, denominators)
    metrics.update(learning_rate=schedule(state.step), grad_norm=tree_norm(grads))
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics

  return train_step


def make_eval_step(task, model):
  """(params, batch, frozen) -> what the task's evaluate() collects (deterministic forward)."""
  def eval_step(params, batch, frozen=None):
    return task.eval_outputs(task.forward(model, params, batch, deterministic=True,
                                          frozen=frozen), batch)
  return eval_step
