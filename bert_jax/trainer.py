"""The training loop: flat, one banner per phase. Fork it rather than configure it.

  mesh + logging -> data -> model + optimizer (sharded init) -> init_from / restore
  -> jitted train/eval steps -> loop (log, eval, checkpoint) -> final eval

Everything is sharded through the logical-axis rules (bert_jax.sharding): the same code
runs on 1 CPU, a simulated 8-device mesh and a pod slice.
"""
import dataclasses
import json
import os
import time

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from bert_jax import checkpoint, optim, sharding
from bert_jax import flops as flops_lib
from bert_jax.metric_writers import MetricWriter, format_progress
from bert_jax.models.config import BertConfig
from bert_jax.models.layout import stack_layers
from bert_jax.pretrained import load_config, load_params
from bert_jax.tasks import get_task


# Printed in the final summary line when a task reports them.
_HEADLINE_METRICS = ("accuracy", "f1", "matthews_corrcoef", "pearson", "spearman",
                     "exact_match", "exact", "best_f1")


@flax.struct.dataclass
class TrainState:
  step: jax.Array
  params: dict
  opt_state: optax.OptState


def _tree_norm(tree):
  return jnp.sqrt(sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree)))


def _merge_pretrained(params, pretrained, path: str):
  """Copies every tensor of `pretrained` into `params`; shapes and names must match.

  Adapts the usual encoder/task differences and says so: an encoder-only checkpoint goes
  under a task model's `bert`; a pretraining checkpoint gives only its encoder to a
  fine-tuning model (its MLM/NSP heads are dropped); a pooler the model lacks (token
  tasks) is dropped. Heads the checkpoint lacks keep their fresh initialisation.
  """
  def merge(ours, theirs, prefix):
    if not isinstance(theirs, dict):
      if ours.shape != theirs.shape:
        raise ValueError(f"init_from {path}: {prefix} has shape {theirs.shape}, the model "
                         f"expects {ours.shape}")
      return jnp.asarray(theirs, ours.dtype)
    unknown = set(theirs) - set(ours)
    if unknown:
      raise ValueError(f"init_from {path}: {prefix or 'params'} has no {sorted(unknown)}")
    return {k: merge(ours[k], theirs[k], f"{prefix}/{k}" if prefix else k) if k in theirs
            else ours[k] for k in ours}

  notes = []
  if "bert" in params and "bert" not in pretrained:
    pretrained = {"bert": pretrained}  # an encoder-only checkpoint under a task model
  dropped = sorted(set(pretrained) - set(params))
  if "bert" in params and dropped:
    pretrained = {"bert": pretrained["bert"]}
    notes.append(f"dropped the checkpoint's {dropped}")
  encoder, theirs = params.get("bert", params), pretrained.get("bert", pretrained)
  if "pooler" in theirs and "pooler" not in encoder:
    theirs = {k: v for k, v in theirs.items() if k != "pooler"}
    pretrained = {**pretrained, "bert": theirs} if "bert" in pretrained else theirs
    notes.append("dropped the checkpoint's pooler (the model has none)")
  fresh = sorted(set(params) - set(pretrained))
  if fresh:
    notes.append(f"newly initialised {fresh}")
  return merge(params, pretrained, ""), notes


def make_train_step(task, model, tx, schedule, accum: int, dropout_rng):
  """(state, batch) -> (state, metrics): one optimizer update over `accum` micro-batches.

  Losses are the task's sums divided by the WHOLE batch's denominators, so accumulating
  micro-batch gradients gives the big batch's gradient (up to summation order).
  """
  def grads_and_sums(params, batch, rng, denominators):
    def loss_fn(p, micro, micro_rng):
      outputs = task.forward(model, p, micro, deterministic=False, rng=micro_rng)
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

  def train_step(state, batch):
    denominators = task.denominators(batch)
    step_rng = jax.random.fold_in(dropout_rng, state.step)
    grads, sums = grads_and_sums(state.params, batch, step_rng, denominators)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = task.metrics(sums, denominators)
    metrics.update(learning_rate=schedule(state.step), grad_norm=_tree_norm(grads),
                   param_norm=_tree_norm(params))
    return TrainState(step=state.step + 1, params=params, opt_state=opt_state), metrics

  return train_step


def make_eval_step(task, model):
  """(params, batch) -> what the task's evaluate() collects (deterministic forward)."""
  def eval_step(params, batch):
    return task.eval_outputs(task.forward(model, params, batch, deterministic=True), batch)
  return eval_step


@dataclasses.dataclass(frozen=True)
class Setup:
  """Everything about the model that does not depend on data or the workdir."""
  task: object
  model_config: BertConfig
  model: nn.Module
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  mesh: jax.sharding.Mesh
  rules: tuple
  init_state: object  # rng -> boxed TrainState
  abstract_state: TrainState  # unboxed ShapeDtypeStructs
  state_sharding: TrainState
  batch_sharding: jax.sharding.NamedSharding
  init_rng: jax.Array
  dropout_rng: jax.Array


def resolve_model_config(config: ml_collections.ConfigDict) -> BertConfig:
  """config.model in full (it has vocab_size), or init_from's config + config.model fields."""
  fields = dict(config.model)
  if "vocab_size" in fields:
    return BertConfig(**fields)
  if not config.init_from:
    raise ValueError("config.model does not give the architecture (no vocab_size) and "
                     "config.init_from is empty: set one of them")
  return load_config(config.init_from).replace(**fields)


def check_vocab_size(config: ml_collections.ConfigDict, vocab_entries: int) -> None:
  """The tokenizer's vocabulary must have exactly the model's vocab_size entries."""
  model_vocab_size = resolve_model_config(config).vocab_size
  if vocab_entries == model_vocab_size:
    return
  source = (f"config.data.vocab_path={config.data.vocab_path}" if config.data.get("vocab_path")
            else f"the vocab.txt beside config.init_from={config.init_from}"
            if config.task != "pretraining" else "the default vocabulary")
  raise ValueError(f"{source} has {vocab_entries} entries but the model's vocab_size is "
                   f"{model_vocab_size}: set --config.model.vocab_size={vocab_entries} or "
                   f"use a vocabulary of {model_vocab_size} entries")


def build(config: ml_collections.ConfigDict, task=None, total_steps: int | None = None) -> Setup:
  """Task, mesh, model, optimizer and the shardings of the train state, from the config."""
  task = task or get_task(config.task)
  model_config = resolve_model_config(config)
  mesh = sharding.make_mesh(config.mesh)
  rules = sharding.rules_from_config(config.logical_axis_rules)
  accum = int(config.grad_accum_steps)
  if config.data.batch_size % (accum * jax.process_count()):
    raise ValueError(f"config.data.batch_size={config.data.batch_size} must divide by "
                     f"grad_accum_steps x processes = {accum * jax.process_count()}")
  model = task.build_model(model_config, config)
  tx, schedule = optim.make_optimizer(config.optim, total_steps or int(config.num_train_steps))
  if config.get("freeze_encoder"):
    tx = optim.freeze(tx)

  def init_state(rng):
    example = task.example_batch(config, batch_size=1)
    params = model.init({"params": rng}, example["input_ids"], example["token_type_ids"],
                        example["attention_mask"])["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

  init_rng, dropout_rng = jax.random.split(jax.random.key(config.seed))
  abstract_boxed = jax.eval_shape(init_state, init_rng)
  state_sharding = sharding.state_shardings(abstract_boxed, mesh, rules)
  return Setup(task=task, model_config=model_config, model=model, tx=tx, schedule=schedule,
               mesh=mesh, rules=rules, init_state=init_state,
               abstract_state=nn.unbox(abstract_boxed), state_sharding=state_sharding,
               batch_sharding=sharding.batch_sharding(mesh, rules), init_rng=init_rng,
               dropout_rng=dropout_rng)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Trains per `config`, resuming from WORKDIR/checkpoints; returns the final metrics."""
  # ------------------------------------------------------------------------------------
  # Data (first: a fine-tuning run's length is counted in epochs of its data).
  # ------------------------------------------------------------------------------------
  task = get_task(config.task)
  check_vocab_size(config, task.make_tokenizer(config).vocab_size)  # before any tokenizing
  train_input, eval_input = task.make_inputs(config, jax.process_index(), jax.process_count())
  total_steps = int(config.num_train_steps)
  if total_steps <= 0:
    total_steps = max(1, round(config.num_train_epochs * train_input.steps_per_epoch))

  # ------------------------------------------------------------------------------------
  # Setup: mesh, model, optimizer, shardings; logging.
  # ------------------------------------------------------------------------------------
  setup = build(config, task, total_steps)
  model_config, mesh, rules = setup.model_config, setup.mesh, setup.rules
  state_sharding, batch_sharding = setup.state_sharding, setup.batch_sharding
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  is_chief = jax.process_index() == 0
  writer = MetricWriter(workdir, enabled=is_chief)
  if is_chief:
    checkpoint.write_model_config(workdir, model_config, task=config.task)
    task.tokenizer.save(workdir)  # so the workdir loads like any pretrained model
    with open(os.path.join(workdir, "config.json"), "w") as f:
      f.write(config.to_json_best_effort(indent=2))
  peak_flops = flops_lib.device_peak_flops(model_config.dtype) * jax.device_count()

  # ------------------------------------------------------------------------------------
  # Initialise params and optimizer state directly into their shardings.
  # ------------------------------------------------------------------------------------
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    state = jax.jit(lambda r: nn.unbox(setup.init_state(r)),
                    out_shardings=state_sharding)(setup.init_rng)

  # ------------------------------------------------------------------------------------
  # Restore (automatic, from the workdir) or init_from pretrained weights.
  # ------------------------------------------------------------------------------------
  checkpoints = checkpoint.TrainCheckpoints(workdir, config.max_checkpoints_to_keep)
  latest = checkpoints.latest_step()
  if latest is not None:
    abstract = jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
                            state, state_sharding)
    state, position = checkpoints.restore(latest, abstract)
    train_input.restore(position)
    writer.truncate_after(latest)
    print(f"Resumed from {checkpoints.directory} at step {latest}", flush=True)
  elif config.init_from:
    pretrained_config, pretrained, _ = load_params(config.init_from)
    if pretrained_config.vocab_size != model_config.vocab_size:
      raise ValueError(f"init_from {config.init_from}: vocab_size "
                       f"{pretrained_config.vocab_size} != config.model.vocab_size "
                       f"{model_config.vocab_size}")
    if model_config.scan_layers:
      pretrained = stack_layers(pretrained, model_config.num_hidden_layers)
    params, notes = _merge_pretrained(jax.device_get(state.params), pretrained,
                                      config.init_from)
    state = state.replace(params=jax.device_put(params, state_sharding.params))
    print(f"Initialised from {config.init_from}" + (f" ({'; '.join(notes)})" if notes else ""),
          flush=True)

  # ------------------------------------------------------------------------------------
  # Steps.
  # ------------------------------------------------------------------------------------
  train_step = make_train_step(task, setup.model, setup.tx, setup.schedule,
                               int(config.grad_accum_steps), setup.dropout_rng)
  eval_step = make_eval_step(task, setup.model)

  p_train_step = jax.jit(train_step, in_shardings=(state_sharding, batch_sharding),
                         out_shardings=(state_sharding, replicated), donate_argnums=0)
  p_eval_step = jax.jit(eval_step, in_shardings=(state_sharding.params, batch_sharding),
                        out_shardings=replicated)

  def evaluate(params) -> dict:
    """The task's eval metrics on the eval split, keys prefixed with eval_."""
    if eval_input is None:
      return {}

    def run_eval(local_batch):
      with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        return p_eval_step(params, sharding.global_batch(local_batch, mesh, rules))
    return {f"eval_{k}": v for k, v in task.evaluate(run_eval, eval_input, config).items()}

  # ------------------------------------------------------------------------------------
  # Loop.
  # ------------------------------------------------------------------------------------
  step = int(jax.device_get(state.step))
  last_metrics: dict = {}
  tokens_since, flops_since, time_since, loop_start, start_step = 0, 0.0, time.time(), None, step
  while step < total_steps:
    local = next(train_input)
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
      state, metrics = p_train_step(state, sharding.global_batch(local, mesh, rules))
    step += 1
    tokens_since += task.tokens(local) * jax.process_count()
    flops_since += task.step_flops(model_config, local) * jax.process_count()
    if loop_start is None:  # the first step includes compilation; time from the second
      jax.block_until_ready(metrics)
      loop_start, time_since, start_step = time.time(), time.time(), step
      tokens_since, flops_since = 0, 0.0

    if step % config.log_every_steps == 0 or step == total_steps:
      metrics = jax.device_get(metrics)
      if not np.isfinite(metrics["loss"]):
        raise FloatingPointError(f"step {step}: loss is {metrics['loss']} (grad_norm "
                                 f"{metrics['grad_norm']}); stopping")
      now = time.time()
      metrics["tokens_per_sec"] = tokens_since / max(now - time_since, 1e-9)
      metrics["mfu"] = flops_since / max(now - time_since, 1e-9) / peak_flops
      tokens_since, flops_since, time_since = 0, 0.0, now
      per_step = (now - loop_start) / max(step - start_step, 1)
      last_metrics = {k: float(v) for k, v in metrics.items()}
      writer.write(step, last_metrics)
      if is_chief:
        print(format_progress(step, total_steps, last_metrics, per_step * (total_steps - step)),
              flush=True)

    if config.eval_every_steps and step % config.eval_every_steps == 0 and step < total_steps:
      eval_metrics = evaluate(state.params)
      if eval_metrics:
        writer.write(step, eval_metrics)
        if is_chief:
          print("eval: " + ", ".join(f"{k} {v:.4f}" for k, v in eval_metrics.items()
                                     if isinstance(v, float)), flush=True)

    if step % config.checkpoint_every_steps == 0 or step == total_steps:
      checkpoints.save(step, state, train_input.state())

  # ------------------------------------------------------------------------------------
  # Final eval.
  # ------------------------------------------------------------------------------------
  checkpoints.wait()
  final = dict(last_metrics)
  if loop_start is not None and step > start_step:  # throughput of this process's loop
    final["train_examples_per_sec"] = ((step - start_step) * config.data.batch_size /
                                       max(time.time() - loop_start, 1e-9))
  eval_metrics = evaluate(state.params)
  if eval_metrics:
    writer.write(step, eval_metrics)
    final.update(eval_metrics)
  checkpoints.close()
  if is_chief:
    summary = ", ".join(f"{k} {v:.4f}" for k, v in final.items()
                        if isinstance(v, float) and k.split("eval_")[-1] in
                        (*task.metric_names, *_HEADLINE_METRICS))
    print(f"Finished at step {step}: {summary}", flush=True)
    with open(os.path.join(workdir, "eval_results.json"), "w") as f:
      json.dump({"step": step, **final}, f, indent=2)
    if config.get("predict") and eval_metrics:
      print(f"Wrote {task.write_predictions(task.last_eval_outputs, config, workdir)}",
            flush=True)
  return final


