"""The training loop's named pieces (bert_jax/run/trainer.py runs them): the jitted steps on
the mesh (RunSteps), evaluation and the epoch picked on held-back examples (Evaluator), the
finite checks before every save (Saver: the checkpoint policy), the throughput / MFU / fill
counters (Throughput), and what a step, an evaluation and the run's end write and print.
"""
import collections
import dataclasses
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import distributed  # its client: no public handle (multihost_utils reads it so)

from bert_jax.run import sharding
from bert_jax.files import storage
from bert_jax.run import run_report
from bert_jax.run.checkpoints import TrainCheckpoints
from bert_jax.run.metric_writers import MetricWriter, format_progress
from bert_jax.run.run_setup import Setup
from bert_jax.run.steps import keep_best, make_eval_step, tree_norm
from bert_jax.core.task import Input, Task, TaskInputs

# How long a process waits at the barrier for its peers to compile a step (a large model's
# compile on a slow host can take many minutes).
BARRIER_MS = 60 * 60 * 1000
# Train steps a multi-process CPU run lets the host dispatch ahead of its devices.
CPU_STEPS_IN_FLIGHT = 4

# Printed in the final summary line when a task reports them.
_HEADLINE_METRICS = ("accuracy", "f1", "matthews_corrcoef", "pearson", "spearman",
                     "exact_match", "exact", "best_f1", "macro_f1", "micro_f1")


def bound_steps_in_flight(in_flight: collections.deque, outputs) -> None:
  """(Multi-process runs on CPU.) Waits for this process's own step CPU_STEPS_IN_FLIGHT
  back before the loop dispatches more: with some 50 cross-process steps queued, XLA's CPU
  collectives (gloo) hang. The wait is local, no barrier; TPUs and GPUs are not bounded."""
  if jax.process_count() == 1 or jax.default_backend() != "cpu":
    return
  in_flight.append(outputs)
  if len(in_flight) > CPU_STEPS_IN_FLIGHT:
    jax.block_until_ready(in_flight.popleft())


@dataclasses.dataclass
class RunSteps:
  """The jitted train / eval steps on the mesh, with the frozen params they read."""
  setup: Setup  # the mesh, rules, shardings, model and optimizer
  frozen: dict | None
  p_train_step: object
  p_eval_step: object
  p_param_norm: object
  p_keep_best: object
  global_batch: dict | None = None  # the last train step's, for the run report's cost
  started_shapes: set = dataclasses.field(default_factory=set)  # (multi-process) compiled
  in_flight: collections.deque = dataclasses.field(default_factory=collections.deque)

  @classmethod
  def make(cls, setup: Setup, frozen: dict | None) -> "RunSteps":
    """frozen: the task's frozen params on the mesh (Setup.place_frozen; None without)."""
    state_sharding, batch_sharding = setup.state_sharding, setup.batch_sharding
    replicated = setup.replicated
    eval_step = make_eval_step(setup.task, setup.model)
    return cls(
        setup=setup, frozen=frozen, p_train_step=setup.jit_train_step(),
        p_eval_step=jax.jit(eval_step, in_shardings=(state_sharding.params, batch_sharding,
                                                     setup.frozen_sharding),
                            out_shardings=replicated),
        p_param_norm=jax.jit(tree_norm, in_shardings=(state_sharding.params,),
                             out_shardings=replicated),
        p_keep_best=jax.jit(keep_best, in_shardings=(state_sharding, replicated),
                            out_shardings=state_sharding, donate_argnums=0))

  def train(self, state, local_batch):
    with self.setup.on_mesh():
      self.global_batch = sharding.global_batch(local_batch, self.setup.mesh, self.setup.rules)
      if jax.process_count() > 1:
        self._start_together(state)
      state, metrics = self.p_train_step(state, self.global_batch, self.frozen)
    bound_steps_in_flight(self.in_flight, metrics)
    return state, metrics

  def _start_together(self, state) -> None:
    """A batch shape's first step, on several processes: compiled here, then every process
    waits for the others at a barrier of the coordination service, so that the step's
    first cross-process exchange starts on all of them at once. (On CPU that exchange
    sets up the gloo collectives, which wait 30 s for the peers: a process whose compile
    ran slower, another job on its host, failed the run.)"""
    shapes = tuple(sorted((k, v.shape) for k, v in self.global_batch.items()))
    if shapes in self.started_shapes:
      return
    self.p_train_step.lower(state, self.global_batch, self.frozen).compile()
    client = distributed.global_state.client
    if client is not None:
      client.wait_at_barrier(f"bert_jax_step_{len(self.started_shapes)}", BARRIER_MS)
    self.started_shapes.add(shapes)

  def eval(self, params, local_batch):
    with self.setup.on_mesh():
      return self.p_eval_step(params, sharding.global_batch(local_batch, self.setup.mesh,
                                                            self.setup.rules), self.frozen)

  def param_norm(self, params) -> float:
    with jax.set_mesh(self.setup.mesh):
      return float(jax.device_get(self.p_param_norm(params)))

  def keep_best(self, state, score: float):
    """The state with its params kept as the best if `score` beats the best so far
    (steps.keep_best; the state is donated)."""
    with jax.set_mesh(self.setup.mesh):
      return self.p_keep_best(state, jnp.float32(score))

  def compile_widths(self, state, width_examples) -> None:
    """Every padded width of the training batches, compiled now rather than mid-loop (a
    longer batch first coming at step 500 would stall the run there, and its timing)."""
    if len(width_examples) <= 1:
      return
    start = time.time()
    with self.setup.on_mesh():
      for example in width_examples:
        abstract = {k: jax.ShapeDtypeStruct((v.shape[0] * jax.process_count(), *v.shape[1:]),
                                            v.dtype, sharding=self.setup.batch_sharding)
                    for k, v in example.items()}
        self.p_train_step.lower(state, abstract, self.frozen).compile()
    shapes = ["x".join(map(str, e["input_ids"].shape)) for e in width_examples]
    print(f"Compiled the train step for batch shapes {shapes} (per process) "
          f"in {time.time() - start:.1f} s", flush=True)

  def compiled_flops(self, state):
    if self.global_batch is None:
      return None
    with self.setup.on_mesh():
      return run_report.compiled_flops(self.p_train_step, state, self.global_batch,
                                       self.frozen)


def prefixed(evaluation) -> dict:
  """An Evaluation's metrics as eval_<name> (empty without one)."""
  return {} if evaluation is None else {f"eval_{k}": v for k, v in evaluation.metrics.items()}


class Evaluator:
  """The task's evaluation of the eval split, and the epoch picked on held-back training
  examples (config.data.select_fraction: every epoch, the state keeps its best params)."""

  def __init__(self, task: Task, steps: RunSteps, inputs: TaskInputs):
    self.task, self.steps, self.inputs = task, steps, inputs
    self.select_every = inputs.steps_per_epoch if inputs.select is not None else 0
    self.held_back = dataclasses.replace(inputs, eval=inputs.select,
                                         eval_metadata=inputs.select_metadata, predict=None)

  def selects_at(self, step: int, total_steps: int) -> bool:
    """Whether the held-back examples are scored after `step` (every epoch, and the last)."""
    return bool(self.select_every) and (step % self.select_every == 0 or step == total_steps)

  def evaluate(self, params, split=None):
    """The task's Evaluation on split.eval (None without one)."""
    split = self.inputs if split is None else split
    if split.eval is None:
      return None
    return self.task.evaluate(lambda local_batch: self.steps.eval(params, local_batch), split)

  def keep_best(self, state, step: int, writer: MetricWriter, last: bool):
    """Scores the held-back examples, keeps the best params; the run ends on them."""
    metric = self.inputs.select_metric
    scores = self.evaluate(state.params, self.held_back).metrics
    state = self.steps.keep_best(state, scores[metric])
    best = jax.device_get((state.best_score, state.best_step))
    writer.write(step, {f"select_{k}": v for k, v in scores.items()})
    if jax.process_index() == 0:
      print(f"held back: {metric} {scores[metric]:.4f} (best {best[0]:.4f}, step {best[1]})",
            flush=True)
    if last:  # the run ends on the best params: saved, then evaluated
      state = state.replace(params=state.best_params)
    return state

  def selected(self, state) -> dict:
    """The picked step and its held-back score, for the final results."""
    if self.inputs.select is None:
      return {}
    best_score, best_step = jax.device_get((state.best_score, state.best_step))
    return {"selected_step": int(best_step),
            f"selected_{self.inputs.select_metric}": float(best_score)}


class Saver:
  """The checkpoint policy's guard: a step whose loss or gradient is not finite, or
  params that are not, stop the run before anything is saved over the last good
  checkpoint. The check syncs at log and checkpoint steps only (which wait for the device
  anyway): finite gradients keep finite params finite, so checking the params when the
  run logs or saves is enough, and the step itself skips a pass over them."""

  def __init__(self, checkpoints: TrainCheckpoints, steps: RunSteps, train_input: Input,
               last_saved: int | None):
    self.checkpoints, self.steps, self.train_input = checkpoints, steps, train_input
    self.last_saved = last_saved  # the step of the last good checkpoint (None: none yet)
    self.unchecked = []  # (step, metrics on device) not yet checked for NaN/inf

  def record(self, step: int, metrics) -> None:
    """A step's metrics (on device), checked at the next log or save."""
    self.unchecked.append((step, metrics))

  def check_finite(self, state, step: int) -> float:
    """Raises FloatingPointError on the first non-finite step; returns the param norm."""
    values = jax.device_get([(s, m["loss"], m["grad_norm"]) for s, m in self.unchecked])
    self.unchecked.clear()
    param_norm = self.steps.param_norm(state.params)
    kept = (f"the last good checkpoint is step {self.last_saved} in "
            f"{self.checkpoints.directory}" if self.last_saved is not None
            else "no checkpoint was saved")
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

  def save(self, step: int, state) -> None:
    self.check_finite(state, step)
    self.checkpoints.save(step, state, self.train_input.state())
    self.last_saved = step

  def wait(self) -> None:
    """Until the last save is written whole."""
    self.checkpoints.wait()

  def close(self) -> None:
    self.wait()
    self.checkpoints.close()


class Throughput:
  """Tokens, model FLOPs and real (non-padding) tokens per second since the last log
  line, timed from the second step (the first includes compilation), and this
  invocation's totals for its run report."""

  def __init__(self, invocation: run_report.Invocation, energy: run_report.EnergyMeter,
               peak_flops: float):
    self.invocation, self.energy, self.peak_flops = invocation, energy, peak_flops
    self.tokens = self.real = 0
    self.flops = 0.0
    self.since = time.time()
    self.loop_start = None  # after the first step
    self.start_step = invocation.first_step
    self.invocation_start = time.time()
    self.last_local = None  # the last step's local batch (its FLOPs for the report)

  def count(self, task: Task, local: dict, metrics, step: int) -> None:
    step_tokens = task.tokens(local) * jax.process_count()
    step_flops = task.step_flops(local) * jax.process_count()
    self.last_local = local
    self.tokens += step_tokens
    self.real += int(np.sum(local["attention_mask"])) * jax.process_count()
    self.flops += step_flops
    self.invocation.steps += 1
    self.invocation.tokens += step_tokens
    self.invocation.model_flops += step_flops
    if self.loop_start is None:  # the first step includes compilation; time from the second
      jax.block_until_ready(metrics)
      self.loop_start, self.since, self.start_step = time.time(), time.time(), step
      self.tokens, self.flops, self.real = 0, 0.0, 0
    else:
      self.invocation.steady_flops += step_flops

  def rates(self, step: int) -> tuple[dict, float]:
    """(tokens_per_sec, mfu, real_tokens_per_sec, fill_rate since the last call; seconds
    per step since the loop's second step); restarts the counts."""
    now = time.time()
    seconds = max(now - self.since, 1e-9)
    rates = {"tokens_per_sec": self.tokens / seconds,
             "mfu": self.flops / seconds / self.peak_flops,
             "real_tokens_per_sec": self.real / seconds,
             "fill_rate": self.real / max(self.tokens, 1)}
    self.tokens, self.flops, self.real, self.since = 0, 0.0, 0, now
    return rates, (now - self.loop_start) / max(step - self.start_step, 1)

  def examples_per_sec(self, step: int, batch_size: int) -> dict:
    """This process's loop throughput, for the final results (none before a second step)."""
    if self.loop_start is None or step <= self.start_step:
      return {}
    return {"train_examples_per_sec": ((step - self.start_step) * batch_size /
                                       max(time.time() - self.loop_start, 1e-9))}

  def close(self, loop_end: float) -> None:
    self.invocation.train_seconds = loop_end - self.invocation_start
    if self.loop_start is not None:
      self.invocation.steady_seconds = loop_end - self.loop_start


def log_metrics(writer: MetricWriter, step: int, total_steps: int, metrics, param_norm: float,
         meter: Throughput) -> dict:
  """The step's metrics with the param norm and throughput: written, and printed."""
  rates, per_step = meter.rates(step)
  logged = {k: float(v) for k, v in {**jax.device_get(metrics), "param_norm": param_norm,
                                     **rates}.items()}
  writer.write(step, logged)
  if jax.process_index() == 0:
    print(format_progress(step, total_steps, logged, per_step * (total_steps - step)),
          flush=True)
  return logged


def write_eval(writer: MetricWriter, step: int, eval_metrics: dict) -> None:
  if eval_metrics:
    writer.write(step, eval_metrics)
    if jax.process_index() == 0:
      print("eval: " + ", ".join(f"{k} {v:.4f}" for k, v in eval_metrics.items()
                                 if isinstance(v, float)), flush=True)


def report(config, workdir: str, task: Task, steps: RunSteps, meter: Throughput, state,
            loop_end: float, stopped_by=None, data_notes=()) -> None:
  """Writes this invocation's run report (WORKDIR/run_report.json) and prints it;
  data_notes: TaskInputs.data_notes (the bad records skipped)."""
  if jax.process_index() != 0 or steps.global_batch is None:
    return
  meter.close(loop_end)
  entry = run_report.invocation_report(
      meter.invocation, step_flops=task.step_flops(meter.last_local) * jax.process_count(),
      step_flops_compiled=steps.compiled_flops(state), peak_flops=meter.peak_flops,
      meter=meter.energy, report_config=config.get("report") or run_report.default_config(),
      stopped_by=stopped_by, data_notes=data_notes)
  run_report.append(workdir, entry)
  print(run_report.summary_line(entry), flush=True)


def write_results(workdir: str, task: Task, step: int, final: dict,
                   finished_before: bool) -> dict:
  """WORKDIR/eval_results.json and the summary line (process 0)."""
  if finished_before:  # re-evaluated only to write predictions: keep the run's keys
    final = {**json.loads(storage.read_text(storage.join(workdir, "eval_results.json"))),
             **final}
  summary = ", ".join(f"{k} {v:.4f}" for k, v in final.items()
                      if isinstance(v, float) and k.split("eval_")[-1] in
                      (*task.metric_names, *_HEADLINE_METRICS))
  print(f"Finished at step {step}: {summary or 'no metrics (an unlabeled eval split)'}",
        flush=True)
  storage.write_text(storage.join(workdir, "eval_results.json"),
                     json.dumps({"step": step, **final}, indent=2))
  return final
