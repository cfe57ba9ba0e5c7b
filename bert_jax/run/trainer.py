"""The training loop: flat, one banner per phase. Fork it rather than configure it.

  task + tokenizer -> data -> mesh, model + optimizer (sharded init) -> restore / init_from
  -> jitted train/eval steps -> loop (log, eval, checkpoint) -> final eval

The trainer knows tasks only through bert_jax/core/task.py's contract; bert_jax/run/tasks.py's
registry names them. The setup (mesh, model, optimizer, shardings, the jitted train step) is
bert_jax/run/run_setup.py's, shared with --compile_only; the loop's pieces (steps on the
mesh, evaluation, checkpoint policy, throughput) are named in bert_jax/run/loop.py.
Everything is sharded through the logical-axis rules (bert_jax.run.sharding): the same code
runs on 1 CPU, a simulated 8-device mesh and a pod slice.
"""
import dataclasses
import json
import time

import jax
import ml_collections

from bert_jax.weights import checkpoint
from bert_jax.core import flops as flops_lib
from bert_jax.run import init_chain
from bert_jax.run import run_report
from bert_jax.run.run_checks import check_vocab_size, validate_config
from bert_jax.run.checkpoints import TrainCheckpoints
from bert_jax.files import storage
from bert_jax.run.tasks import make_task, task_class
from bert_jax.run.run_setup import Setup, build, resolve_model_config
from bert_jax.run import loop
from bert_jax.run.loop import Evaluator, RunSteps, Saver, Throughput, prefixed
from bert_jax.run.stop_signals import StopSignals
from bert_jax import weights
from bert_jax.run import workdir as workdir_lib
from bert_jax.run.metric_writers import MetricWriter, check_wandb
from bert_jax.core.task import Task
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import make_tokenizer


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Trains per `config`, resuming from WORKDIR/checkpoints; returns the final metrics.

  Everything that can refuse the run (config values, the model the workdir already holds,
  its data position, a lock held by another run) is checked before anything in the
  workdir is written. SIGTERM/SIGINT stop after the current step with a checkpoint; the
  result then has "stopped_by" (the signal's name) and "step". Storage that fails once
  saving has begun (a bucket out of reach) stops the run with one line naming the last
  whole checkpoint (TrainCheckpoints.lost).

  config: an experiment's ConfigDict (configs/*.py `get_config(arg)`); its `task` names
  the task (bert_jax.run.tasks), which builds the model, the inputs and the loss.
  workdir: where checkpoints, metrics, model_config.json and the run report go (a local
  folder or a gs:// URL); a second call with the same workdir resumes the run.

  The command line's `python -m bert_jax.train --config=... --workdir=...` is this call.
  A pretraining smoke run (configs/tiny.py shrunk by runlocal; a prepared corpus and its
  vocab, see docs/getting-started.md):

  ```python
  from configs import tiny
  from bert_jax.run.trainer import train_and_evaluate

  config = tiny.get_config("corpus=runs/corpus/pretrain.txt,runlocal=True")  # 20 steps
  config.num_train_steps = 40  # any field can be changed before the run
  metrics = train_and_evaluate(config, "/tmp/bert_tiny_run")  # the final metrics
  ```
  """
  validate_config(config, task_class(config.task).counts_in_steps)
  check_wandb(config.get("wandb"), workdir)
  with workdir_lib.WorkdirLock(workdir), StopSignals() as stop:
    checkpoints = TrainCheckpoints(workdir, config.max_checkpoints_to_keep)
    try:
      return _train(config, workdir, stop, checkpoints)
    except (OSError, RuntimeError) as error:
      if not checkpoints.saving:
        raise
      raise checkpoints.lost(error) from None


def _train(config: ml_collections.ConfigDict, workdir: str, stop: StopSignals,
           checkpoints: TrainCheckpoints) -> dict:
  invocation, energy = run_report.Invocation(), run_report.EnergyMeter()
  # ------------------------------------------------------------------------------------
  # Task, tokenizer, data (a fine-tuning run's length is counted in epochs of its data).
  # ------------------------------------------------------------------------------------
  # init_from read once: its format, config and records here; its weights by the first
  # reader (a cached frozen encoder's, else the start's), held for the next.
  source = weights.resolve(config.init_from, hold=True) if config.init_from else None
  task = make_task(config, resolve_model_config(config, source), source)
  tokenizer = make_tokenizer(config.data, model_dir=config.init_from,
                             kinds=tokenizer_kinds(task.model_config.family))
  check_vocab_size(config, tokenizer.vocab_size, task.model_config.vocab_size)
  inputs = task.make_inputs(tokenizer, jax.process_index(), jax.process_count())
  total_steps = _total_steps(config, inputs)
  workdir_lib.check_same_model(workdir, task.model_config.to_json_dict(), task.model_spec(),
                               task.label_names)

  # ------------------------------------------------------------------------------------
  # Setup (run_setup.py, as --compile_only's): mesh, model, optimizer, shardings; params
  # and optimizer state initialised directly into their shardings.
  # ------------------------------------------------------------------------------------
  setup = build(config, task, total_steps)
  state = setup.fresh_state()

  # ------------------------------------------------------------------------------------
  # Restore (automatic, from the workdir) or init_from pretrained weights.
  # ------------------------------------------------------------------------------------
  start = _restore_or_start(config, workdir, setup, state, checkpoints, inputs.train,
                            total_steps, source)
  if source is not None:
    source.release()  # the train state holds init_from's weights now
  if start.results is not None:  # finished before: reported again, nothing changed
    return start.results
  state, frozen = start.state, start.frozen

  # From here on the run writes to the workdir (nothing above has).
  writer = _open_workdir(config, workdir, task, tokenizer, start.restored_step, source)

  # ------------------------------------------------------------------------------------
  # Steps, evaluation, the finite-check and checkpoint policy, throughput counters.
  # ------------------------------------------------------------------------------------
  steps = RunSteps.make(setup, frozen)
  evaluator = Evaluator(task, steps, inputs)
  saver = Saver(checkpoints, steps, inputs.train, start.restored_step)
  step = int(jax.device_get(state.step))
  invocation.first_step = step
  if step < total_steps:
    steps.compile_widths(state, inputs.width_examples)
  meter = Throughput(invocation, energy, flops_lib.device_peak_flops(
      setup.model_config.dtype) * jax.device_count())
  last_metrics: dict = {}

  # ------------------------------------------------------------------------------------
  # Loop.
  # ------------------------------------------------------------------------------------
  while step < total_steps:
    local = next(inputs.train)
    state, metrics = steps.train(state, local)
    step += 1
    saver.record(step, metrics)
    meter.count(task, local, metrics, step)

    if step % config.log_every_steps == 0 or step == total_steps:
      last_metrics = loop.log_metrics(writer, step, total_steps, metrics,
                                      saver.check_finite(state, step), meter)
    if config.eval_every_steps and step % config.eval_every_steps == 0 and step < total_steps:
      loop.write_eval(writer, step, prefixed(evaluator.evaluate(state.params)))
    if evaluator.selects_at(step, total_steps):
      state = evaluator.keep_best(state, step, writer, last=step == total_steps)

    stopping = stop.agreed(step)  # SIGTERM/SIGINT here or (multi-process) on any process
    if step % config.checkpoint_every_steps == 0 or step == total_steps or stopping:
      saver.save(step, state)
    if stopping and step < total_steps:
      saver.close()
      by = stop.requested
      loop.report(config, workdir, task, steps, meter, state, time.time(), stopped_by=by,
                  data_notes=inputs.data_notes)
      print(f"Stopped by {by} at step {step}; checkpoint saved in {checkpoints.directory}: "
            "run the same command to resume", flush=True)
      writer.close()
      return {"stopped_by": by, "step": step}

  # ------------------------------------------------------------------------------------
  # Final eval.
  # ------------------------------------------------------------------------------------
  saver.wait()
  jax.block_until_ready(state)
  loop_end = time.time()
  final = {**last_metrics, **meter.examples_per_sec(step, config.data.batch_size)}
  evaluation = evaluator.evaluate(state.params)
  eval_metrics = {**prefixed(evaluation), **evaluator.selected(state)}
  if eval_metrics and not start.finished_before:
    writer.write(step, eval_metrics)
  final.update(eval_metrics)
  checkpoints.close()
  if jax.process_index() == 0:
    final = loop.write_results(workdir, task, step, final, start.finished_before)
    if not start.finished_before:
      loop.report(config, workdir, task, steps, meter, state, loop_end,
                  data_notes=inputs.data_notes)
    if config.get("predict") and evaluation is not None:
      path = storage.write_folder(
          workdir, lambda folder: task.write_predictions(evaluation, inputs, folder))
      if path:
        print(f"Wrote {path}", flush=True)
  writer.close()
  return final


# ----------------------------------------------------------------------------------------
# The pieces of the run, in the order the loop meets them.
# ----------------------------------------------------------------------------------------
def _total_steps(config: ml_collections.ConfigDict, inputs) -> int:
  """config.num_train_steps, or num_train_epochs of the task's data; 0: evaluation only."""
  total_steps = int(config.num_train_steps)
  if total_steps <= 0 and config.get("num_train_epochs", 0) > 0:
    total_steps = max(1, round(config.num_train_epochs * inputs.steps_per_epoch))
  return total_steps


@dataclasses.dataclass
class _Start:
  """Where the run starts: its state (restored or fresh), the frozen params on the mesh,
  the restored step (None: a fresh run), and for a run that had finished before, its
  results (when nothing is left to do) or `finished_before` (re-evaluated to predict)."""
  state: object = None
  frozen: dict | None = None
  restored_step: int | None = None
  finished_before: bool = False
  results: dict | None = None


def _restore_or_start(config, workdir, setup: Setup, state, checkpoints, train_input,
                      total_steps: int, source: weights.Pretrained | None) -> _Start:
  """The latest intact checkpoint of the workdir, else init_from's weights (source; or
  none)."""
  abstract = jax.tree.map(  # the initialised state's shapes and shardings
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), state)
  restored = checkpoints.restore_latest_intact(abstract, check_data=train_input.restore)
  restored_step = None if restored is None else restored[0]
  results_path = storage.join(workdir, "eval_results.json")
  finished_before = (restored_step is not None and restored_step >= total_steps
                     and storage.exists(results_path))
  if finished_before and not config.get("predict"):
    checkpoints.close()  # a finished run: report it again, change nothing
    results = json.loads(storage.read_text(results_path))
    print(f"Already finished at step {restored_step}; results in {results_path}", flush=True)
    return _Start(results=results)

  frozen = frozen_host = None  # the task's untrained params (a teacher)
  if setup.frozen is not None and (setup.frozen.in_step or restored is None):
    frozen_host = setup.frozen.load()  # for the steps, or (init only) a fresh run's start
    if setup.frozen.in_step:
      frozen = setup.place_frozen(frozen_host)
  if restored is not None:
    state = restored[1]
    print(f"Resumed from {checkpoints.directory} at step {restored_step}", flush=True)
  else:
    params, lines = init_chain.fresh_start(config, lambda: jax.device_get(state.params),
                                        setup.model_config, setup.frozen, frozen_host, source)
    if params is not None:
      state = state.replace(params=jax.device_put(params, setup.state_sharding.params))
    for line in lines:
      print(line, flush=True)
  return _Start(state=state, frozen=frozen, restored_step=restored_step,
                finished_before=finished_before)


def _open_workdir(config, workdir: str, task: Task, tokenizer, restored_step,
                  source: weights.Pretrained | None = None) -> MetricWriter:
  """The metric writer (cut back to the restored step); on process 0 the files that make
  the workdir load like any pretrained model, with its head (weights.py), and where
  init_from was a Hub id, the commit its weights came from (model_config.json's
  "init_from": a resumed run keeps the one it started from)."""
  writer = MetricWriter(workdir, enabled=jax.process_index() == 0,
                        wandb_settings=config.get("wandb"), run_config=config.to_dict())
  if jax.process_index() == 0:
    extra = {"labels": list(task.label_names)} if task.label_names else {}
    recorded = storage.join(workdir, checkpoint.MODEL_CONFIG)
    started = (checkpoint.read_model_record(workdir).get("init_from")
               if restored_step is not None and storage.exists(recorded) else None)
    if started or (source is not None and source.hub is not None):
      extra["init_from"] = started or source.hub.record()
    checkpoint.write_model_config(workdir, task.model_config, model=task.model_spec(),
                                  **extra)
    storage.write_folder(workdir, tokenizer.save)
    storage.write_text(storage.join(workdir, "config.json"),
                       config.to_json_best_effort(indent=2))
  if restored_step is not None:
    writer.truncate_after(restored_step)
  return writer
