"""The training loop: flat, one banner per phase. Fork it rather than configure it.

  task + tokenizer -> data -> mesh, model + optimizer (sharded init) -> restore / init_from
  -> jitted train/eval steps -> loop (log, eval, checkpoint) -> final eval

The trainer knows tasks only through bert_jax/task.py's contract; TASKS names them.
Everything is sharded through the logical-axis rules (bert_jax.sharding): the same code
runs on 1 CPU, a simulated 8-device mesh and a pod slice.
"""
import dataclasses
import json
import os
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from bert_jax import checkpoint
from bert_jax import flops as flops_lib
from bert_jax import optim
from bert_jax import run_report
from bert_jax.run_checks import check_vocab_size, validate_config
from bert_jax import sharding
from bert_jax.steps import (SelectingTrainState, TrainState, keep_best, make_eval_step,
                            make_train_step, tree_norm)
from bert_jax.stop_signals import StopSignals
from bert_jax import weights
from bert_jax import workdir as workdir_lib
from bert_jax.finetune.conll import ConllTask
from bert_jax.finetune.glue import GlueTask
from bert_jax.finetune.squad import SquadTask
from bert_jax.finetune.swag import SwagTask
from bert_jax.metric_writers import MetricWriter, format_progress
from bert_jax.models.config import BertConfig
from bert_jax.pretrain.electra import ElectraTask
from bert_jax.pretrain.task import PretrainingTask
from bert_jax.task import FrozenParams, Task
from bert_jax.text.tokenizers import make_tokenizer

# config.task -> the task class; each is built as Task(config, model_config).
TASKS = {"pretraining": PretrainingTask, "electra": ElectraTask, "glue": GlueTask,
         "conll": ConllTask, "squad": SquadTask, "swag": SwagTask}

# Printed in the final summary line when a task reports them.
_HEADLINE_METRICS = ("accuracy", "f1", "matthews_corrcoef", "pearson", "spearman",
                     "exact_match", "exact", "best_f1")


@dataclasses.dataclass(frozen=True)
class Setup:
  """Everything about the model that does not depend on data or the workdir."""
  task: Task
  model_config: BertConfig
  model: nn.Module
  tx: optax.GradientTransformation
  schedule: optax.Schedule
  mesh: jax.sharding.Mesh
  rules: tuple
  init_state: object  # rng -> boxed TrainState
  abstract_state: TrainState  # unboxed ShapeDtypeStructs
  state_sharding: TrainState
  frozen: FrozenParams | None  # what the step reads untrained (task.frozen_params())
  frozen_abstract: dict | None  # their unboxed ShapeDtypeStructs (None without, or not in_step)
  frozen_sharding: dict | None  # their NamedShardings (None without, or not in_step)
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
  return weights.load_config(config.init_from).replace(**fields)


def make_task(config: ml_collections.ConfigDict, model_config: BertConfig) -> Task:
  if config.task not in TASKS:
    raise ValueError(f"config.task={config.task!r}: expected one of {sorted(TASKS)}")
  return TASKS[config.task](config, model_config)


def build(config: ml_collections.ConfigDict, task: Task | None = None,
          total_steps: int | None = None, devices=None) -> Setup:
  """Task, mesh, model, optimizer and the shardings of the train state, from the config.

  devices: those of the mesh (default: jax.devices()); a TPU or GPU target's
  (bert_jax.targets) to compile for it without the hardware.
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
  if config.get("freeze_encoder"):
    tx = optim.freeze(tx)

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
  abstract_boxed = jax.eval_shape(init_state, init_rng)
  state_sharding = sharding.state_shardings(abstract_boxed, mesh, rules)
  frozen, frozen_abstract, frozen_sharding = task.frozen_params(), None, None
  if frozen is not None and frozen.in_step:
    frozen_boxed = jax.eval_shape(lambda r: init_params(frozen.model, r), init_rng)
    frozen_abstract = nn.unbox(frozen_boxed)
    frozen_sharding = sharding.state_shardings(frozen_boxed, mesh, rules)
  return Setup(task=task, model_config=model_config, model=model, tx=tx, schedule=schedule,
               mesh=mesh, rules=rules, init_state=init_state,
               abstract_state=nn.unbox(abstract_boxed), state_sharding=state_sharding,
               frozen=frozen, frozen_abstract=frozen_abstract, frozen_sharding=frozen_sharding,
               batch_sharding=sharding.batch_sharding(mesh, rules), init_rng=init_rng,
               dropout_rng=dropout_rng)


def place_frozen(host_params: dict, shardings: dict) -> dict:
  """The task's frozen host params on the mesh; their tree must be the frozen model's."""
  if jax.tree.structure(shardings) != jax.tree.structure(host_params):
    raise ValueError(f"the frozen params (e.g. a distillation teacher) are not their model's: "
                     f"{sorted(host_params)} vs {sorted(shardings)} at the top")
  return jax.tree.map(lambda x, s: jax.device_put(np.asarray(x, np.float32), s),
                      host_params, shardings)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Trains per `config`, resuming from WORKDIR/checkpoints; returns the final metrics.

  Everything that can refuse the run (config values, the model the workdir already holds,
  its data position, a lock held by another run) is checked before anything in the
  workdir is written. SIGTERM/SIGINT stop after the current step with a checkpoint; the
  result then has "stopped_by" (the signal's name) and "step".
  """
  validate_config(config)
  with workdir_lib.WorkdirLock(workdir), StopSignals() as stop:
    return _train(config, workdir, stop)


def _train(config: ml_collections.ConfigDict, workdir: str, stop: StopSignals) -> dict:
  invocation, meter = run_report.Invocation(), run_report.EnergyMeter()
  # ------------------------------------------------------------------------------------
  # Task, tokenizer, data (a fine-tuning run's length is counted in epochs of its data).
  # ------------------------------------------------------------------------------------
  task = make_task(config, resolve_model_config(config))
  tokenizer = make_tokenizer(config.data, model_dir=config.init_from)
  check_vocab_size(config, tokenizer.vocab_size, task.model_config.vocab_size)
  inputs = task.make_inputs(tokenizer, jax.process_index(), jax.process_count())
  train_input = inputs.train
  total_steps = int(config.num_train_steps)
  if total_steps <= 0 and config.get("num_train_epochs", 0) > 0:  # else evaluation only
    total_steps = max(1, round(config.num_train_epochs * inputs.steps_per_epoch))
  workdir_lib.check_same_model(workdir, task.model_config.to_json_dict(), task.model_spec())

  # ------------------------------------------------------------------------------------
  # Setup: mesh, model, optimizer, shardings.
  # ------------------------------------------------------------------------------------
  setup = build(config, task, total_steps)
  model_config, mesh, rules = setup.model_config, setup.mesh, setup.rules
  state_sharding, batch_sharding = setup.state_sharding, setup.batch_sharding
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  is_chief = jax.process_index() == 0
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
  abstract = jax.tree.map(  # the initialised state's shapes and shardings
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), state)
  restored = checkpoints.restore_latest_intact(abstract, check_data=train_input.restore)
  restored_step = None if restored is None else restored[0]
  results_path = os.path.join(workdir, "eval_results.json")
  finished_before = (restored_step is not None and restored_step >= total_steps
                     and os.path.exists(results_path))
  if finished_before and not config.get("predict"):
    checkpoints.close()  # a finished run: report it again, change nothing
    with open(results_path) as f:
      final = json.load(f)
    print(f"Already finished at step {restored_step}; results in {results_path}", flush=True)
    return final

  frozen = frozen_host = None  # the task's untrained params (a teacher)
  if setup.frozen is not None and (setup.frozen.in_step or restored is None):
    frozen_host = setup.frozen.load()  # for the steps, or (init only) a fresh run's start
    if setup.frozen.in_step:
      frozen = place_frozen(frozen_host, setup.frozen_sharding)

  if restored is not None:
    state = restored[1]
    print(f"Resumed from {checkpoints.directory} at step {restored_step}", flush=True)
  else:
    params, lines = weights.fresh_start(config, lambda: jax.device_get(state.params),
                                        model_config, setup.frozen, frozen_host)
    if params is not None:
      state = state.replace(params=jax.device_put(params, state_sharding.params))
    for line in lines:
      print(line, flush=True)
  del frozen_host

  # From here on the run writes to the workdir (nothing above has).
  writer = MetricWriter(workdir, enabled=is_chief)
  if is_chief:
    # So the workdir loads like any pretrained model, with its head (weights.py).
    checkpoint.write_model_config(workdir, model_config, model=task.model_spec(),
                                  **({"labels": list(task.label_names)} if task.label_names
                                     else {}))
    tokenizer.save(workdir)
    with open(os.path.join(workdir, "config.json"), "w") as f:
      f.write(config.to_json_best_effort(indent=2))
  if restored_step is not None:
    writer.truncate_after(restored_step)
  del restored  # its state is the loop's first input, donated to the first step

  # ------------------------------------------------------------------------------------
  # Steps.
  # ------------------------------------------------------------------------------------
  train_step = make_train_step(task, setup.model, setup.tx, setup.schedule,
                               int(config.grad_accum_steps), setup.dropout_rng)
  eval_step = make_eval_step(task, setup.model)

  p_train_step = jax.jit(train_step, in_shardings=(state_sharding, batch_sharding,
                                                   setup.frozen_sharding),
                         out_shardings=(state_sharding, replicated), donate_argnums=0)
  p_eval_step = jax.jit(eval_step, in_shardings=(state_sharding.params, batch_sharding,
                                                 setup.frozen_sharding),
                        out_shardings=replicated)

  def evaluate(params, split=inputs):
    """The task's Evaluation on split.eval (None without one)."""
    if split.eval is None:
      return None

    def run_eval(local_batch):
      with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        return p_eval_step(params, sharding.global_batch(local_batch, mesh, rules), frozen)
    return task.evaluate(run_eval, split)

  # Picking the epoch on held-back training examples (config.data.select_fraction).
  select_every = inputs.steps_per_epoch if inputs.select is not None else 0
  held_back = dataclasses.replace(inputs, eval=inputs.select,
                                  eval_metadata=inputs.select_metadata)
  p_param_norm = jax.jit(tree_norm, in_shardings=(state_sharding.params,),
                         out_shardings=replicated)
  p_keep_best = jax.jit(keep_best, in_shardings=(state_sharding, replicated),
                        out_shardings=state_sharding, donate_argnums=0)

  def prefixed(evaluation) -> dict:
    return {} if evaluation is None else {f"eval_{k}": v for k, v in evaluation.metrics.items()}

  # ------------------------------------------------------------------------------------
  # Loop.
  # ------------------------------------------------------------------------------------
  step = int(jax.device_get(state.step))
  invocation.first_step = step
  if len(inputs.width_examples) > 1 and step < total_steps:
    # Every padded width of the training batches, compiled now rather than mid-loop (a
    # longer batch first coming at step 500 would stall the run there, and its timing).
    start = time.time()
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
      for example in inputs.width_examples:
        abstract = {k: jax.ShapeDtypeStruct((v.shape[0] * jax.process_count(), *v.shape[1:]),
                                            v.dtype, sharding=batch_sharding)
                    for k, v in example.items()}
        p_train_step.lower(state, abstract, frozen).compile()
    shapes = ["x".join(map(str, e["input_ids"].shape)) for e in inputs.width_examples]
    print(f"Compiled the train step for batch shapes {shapes} (per process) "
          f"in {time.time() - start:.1f} s", flush=True)
  last_metrics: dict = {}
  tokens_since, flops_since, time_since, loop_start, start_step = 0, 0.0, time.time(), None, step
  real_since = 0  # non-padding tokens (attention_mask), for the fill rate
  unchecked = []  # (step, metrics on device) not yet checked for NaN/inf
  last_saved = restored_step
  global_batch = None  # the last step's, for the compiled cost in the run report

  def check_finite() -> float:
    """Stops at the first step whose loss or gradient is not finite, or if the params now
    are not; returns their norm (a sync at log and checkpoint steps only, which wait for the
    device anyway). Finite gradients keep finite params finite, so checking the params
    when the run logs or saves is enough, and the step itself skips a pass over them."""
    values = jax.device_get([(s, m["loss"], m["grad_norm"]) for s, m in unchecked])
    unchecked.clear()
    with jax.set_mesh(mesh):
      param_norm = float(jax.device_get(p_param_norm(state.params)))
    kept = (f"the last good checkpoint is step {last_saved} in {checkpoints.directory}"
            if last_saved is not None else "no checkpoint was saved")
    advice = ("Rerunning the command resumes from it: change what diverged first, e.g. "
              "--config.optim.learning_rate")
    for s, loss, grad_norm in values:
      if not np.isfinite([loss, grad_norm]).all():
        raise FloatingPointError(
            f"step {s}: loss {loss}, grad_norm {grad_norm} are not all finite; stopped "
            f"before saving ({kept}). {advice}")
    if not np.isfinite(param_norm):
      raise FloatingPointError(
          f"step {step}: param_norm {param_norm}: the params are not all finite; stopped "
          f"before saving ({kept}). {advice}")
    return param_norm

  def save(at_step):
    nonlocal last_saved
    check_finite()
    checkpoints.save(at_step, state, train_input.state())
    last_saved = at_step

  def report(loop_end: float, stopped_by=None):
    """Writes this invocation's run report (WORKDIR/run_report.json) and prints it."""
    if not is_chief or global_batch is None:
      return
    invocation.train_seconds = loop_end - invocation_loop_start
    if loop_start is not None:
      invocation.steady_seconds = loop_end - loop_start
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
      compiled = run_report.compiled_flops(p_train_step, state, global_batch, frozen)
    entry = run_report.invocation_report(
        invocation, step_flops=task.step_flops(local) * jax.process_count(),
        step_flops_compiled=compiled, peak_flops=peak_flops, meter=meter,
        report_config=config.get("report") or run_report.default_config(),
        stopped_by=stopped_by)
    run_report.append(workdir, entry)
    print(run_report.summary_line(entry), flush=True)

  invocation_loop_start = time.time()

  while step < total_steps:
    local = next(train_input)
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
      global_batch = sharding.global_batch(local, mesh, rules)
      state, metrics = p_train_step(state, global_batch, frozen)
    step += 1
    unchecked.append((step, metrics))
    step_tokens = task.tokens(local) * jax.process_count()
    step_flops = task.step_flops(local) * jax.process_count()
    tokens_since += step_tokens
    real_since += int(np.sum(local["attention_mask"])) * jax.process_count()
    flops_since += step_flops
    invocation.steps += 1
    invocation.tokens += step_tokens
    invocation.model_flops += step_flops
    if loop_start is None:  # the first step includes compilation; time from the second
      jax.block_until_ready(metrics)
      loop_start, time_since, start_step = time.time(), time.time(), step
      tokens_since, flops_since, real_since = 0, 0.0, 0
    else:
      invocation.steady_flops += step_flops

    if step % config.log_every_steps == 0 or step == total_steps:
      param_norm = check_finite()
      metrics = {**jax.device_get(metrics), "param_norm": param_norm}
      now = time.time()
      metrics["tokens_per_sec"] = tokens_since / max(now - time_since, 1e-9)
      metrics["mfu"] = flops_since / max(now - time_since, 1e-9) / peak_flops
      metrics["real_tokens_per_sec"] = real_since / max(now - time_since, 1e-9)
      metrics["fill_rate"] = real_since / max(tokens_since, 1)
      tokens_since, flops_since, real_since, time_since = 0, 0.0, 0, now
      per_step = (now - loop_start) / max(step - start_step, 1)
      last_metrics = {k: float(v) for k, v in metrics.items()}
      writer.write(step, last_metrics)
      if is_chief:
        print(format_progress(step, total_steps, last_metrics, per_step * (total_steps - step)),
              flush=True)

    if config.eval_every_steps and step % config.eval_every_steps == 0 and step < total_steps:
      eval_metrics = prefixed(evaluate(state.params))
      if eval_metrics:
        writer.write(step, eval_metrics)
        if is_chief:
          print("eval: " + ", ".join(f"{k} {v:.4f}" for k, v in eval_metrics.items()
                                     if isinstance(v, float)), flush=True)

    if select_every and (step % select_every == 0 or step == total_steps):
      scores = evaluate(state.params, held_back).metrics
      with jax.set_mesh(mesh):
        state = p_keep_best(state, jnp.float32(scores[inputs.select_metric]))
      best = jax.device_get((state.best_score, state.best_step))
      writer.write(step, {f"select_{k}": v for k, v in scores.items()})
      if is_chief:
        print(f"held back: {inputs.select_metric} {scores[inputs.select_metric]:.4f} (best "
              f"{best[0]:.4f}, step {best[1]})", flush=True)
      if step == total_steps:  # the run ends on the best params: saved, then evaluated
        state = state.replace(params=state.best_params)

    stopping = stop.agreed()  # SIGTERM/SIGINT here or (multi-process) on any process
    if step % config.checkpoint_every_steps == 0 or step == total_steps or stopping:
      save(step)
    if stopping and step < total_steps:
      checkpoints.wait()
      checkpoints.close()
      by = stop.requested or "a signal to another process"
      report(time.time(), stopped_by=by)
      print(f"Stopped by {by} at step {step}; checkpoint saved in {checkpoints.directory}: "
            "run the same command to resume", flush=True)
      return {"stopped_by": by, "step": step}

  # ------------------------------------------------------------------------------------
  # Final eval.
  # ------------------------------------------------------------------------------------
  checkpoints.wait()
  jax.block_until_ready(state)
  loop_end = time.time()
  final = dict(last_metrics)
  if loop_start is not None and step > start_step:  # throughput of this process's loop
    final["train_examples_per_sec"] = ((step - start_step) * config.data.batch_size /
                                       max(time.time() - loop_start, 1e-9))
  evaluation = evaluate(state.params)
  eval_metrics = prefixed(evaluation)
  if inputs.select is not None:
    best_score, best_step = jax.device_get((state.best_score, state.best_step))
    eval_metrics.update({"selected_step": int(best_step),
                         f"selected_{inputs.select_metric}": float(best_score)})
  if eval_metrics and not finished_before:
    writer.write(step, eval_metrics)
  final.update(eval_metrics)
  checkpoints.close()
  if is_chief:
    if finished_before:  # re-evaluated only to write predictions: keep the run's keys
      with open(results_path) as f:
        final = {**json.load(f), **final}
    summary = ", ".join(f"{k} {v:.4f}" for k, v in final.items()
                        if isinstance(v, float) and k.split("eval_")[-1] in
                        (*task.metric_names, *_HEADLINE_METRICS))
    print(f"Finished at step {step}: {summary or 'no metrics (an unlabeled eval split)'}",
          flush=True)
    with open(os.path.join(workdir, "eval_results.json"), "w") as f:
      json.dump({"step": step, **final}, f, indent=2)
    if not finished_before:
      report(loop_end)
    if config.get("predict") and evaluation is not None:
      path = task.write_predictions(evaluation, inputs, workdir)
      if path:
        print(f"Wrote {path}", flush=True)
  return final


