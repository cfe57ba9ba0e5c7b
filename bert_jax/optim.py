"""The optimizer from config.optim: AdamW or LAMB, warmup + linear decay, clipping.

BERT's recipe: no weight decay on LayerNorm params or biases; linear warmup to the peak
learning rate, then linear decay to `end_learning_rate` at the last step; global-norm
clipping at 1.0. (optax's Adam applies bias correction; the original TF optimizer did not.)

config.optim fields: name ("adamw" | "lamb"), learning_rate, warmup_steps (or, when it
is 0, warmup_fraction of the total steps: BERT fine-tuning warms up over 10%),
end_learning_rate, b1, b2, eps, weight_decay, grad_clip_norm (0 = off).
"""
import jax
import ml_collections
import optax

_NO_DECAY_LEAVES = ("bias", "scale", "output_bias")  # LayerNorm scale/bias, every bias


def default_optim_config() -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(
      name="adamw", learning_rate=1e-4, warmup_steps=10_000, warmup_fraction=0.0,
      end_learning_rate=0.0,
      b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.01, grad_clip_norm=1.0))


def learning_rate_schedule(optim: ml_collections.ConfigDict, total_steps: int):
  """Linear warmup from 0 to the peak over warmup_steps, then linear decay to the end."""
  warmup = int(optim.warmup_steps) or round(optim.warmup_fraction * total_steps)
  warmup = min(warmup, total_steps)
  decay_steps = max(total_steps - warmup, 1)
  return optax.join_schedules(
      [optax.linear_schedule(0.0, optim.learning_rate, max(warmup, 1)),
       optax.linear_schedule(optim.learning_rate, optim.end_learning_rate, decay_steps)],
      boundaries=[warmup])


def weight_decay_mask(params):
  """True where weight decay applies: kernels and embedding tables only."""
  def decays(path, _):
    names = [getattr(k, "key", getattr(k, "name", None)) for k in path]
    names = [n for n in names if n not in (None, "value")]  # skip flax box attributes
    return names[-1] not in _NO_DECAY_LEAVES
  return jax.tree_util.tree_map_with_path(decays, params)


def make_optimizer(optim: ml_collections.ConfigDict, total_steps: int):
  """(optax transformation, learning-rate schedule)."""
  schedule = learning_rate_schedule(optim, total_steps)
  if optim.name == "adamw":
    core = optax.adamw(schedule, b1=optim.b1, b2=optim.b2, eps=optim.eps,
                       weight_decay=optim.weight_decay, mask=weight_decay_mask)
  elif optim.name == "lamb":
    core = optax.lamb(schedule, b1=optim.b1, b2=optim.b2, eps=optim.eps,
                      weight_decay=optim.weight_decay, mask=weight_decay_mask)
  else:
    raise ValueError(f"config.optim.name={optim.name!r}: expected 'adamw' or 'lamb'")
  if optim.grad_clip_norm:
    core = optax.chain(optax.clip_by_global_norm(optim.grad_clip_norm), core)
  return core, schedule


def freeze(tx: optax.GradientTransformation, frozen: tuple[str, ...] = ("bert",)):
  """tx for every top-level param subtree except `frozen`, whose params never change
  (not even by weight decay): the feature-based / frozen-encoder setting."""
  def labels(params):
    return {name: jax.tree.map(lambda _, n=name: "frozen" if n in frozen else "trained", sub)
            for name, sub in params.items()}
  return optax.multi_transform({"trained": tx, "frozen": optax.set_to_zero()}, labels)
