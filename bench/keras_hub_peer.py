r"""MLM pretraining step throughput: ours (jitted JAX) vs keras-hub's BertMaskedLM (Keras 3 on
its JAX backend), in one process on the same JAX.

Same shapes on both sides: vocab 30,522, `--predictions` masked positions per row (their
logits only, as both models compute them), AdamW (lr 1e-4, eps 1e-6, weight decay 0.01,
global-norm clipping at 1.0), dropout 0.1 on, fp32; our loss is MLM alone (no NSP), as
BertMaskedLM's. The two are timed in alternating rounds (bench/train_step.py's scheme: an
untimed step of a side before its timed ones), so machine noise hits both alike. What still
differs: keras's AdamW decays every weight (ours skips LayerNorm scales and biases) and its
step runs through `train_on_batch` (a Python call around the jitted step, as `fit` runs it).

keras-hub is not part of requirements.txt; install it beside the pinned stack (its own
dependencies are the pinned stack's Keras 3 and JAX):

  pip install --no-deps --target ~/keras-hub keras-hub==0.32.0 kagglehub==1.0.2 kagglesdk==0.1.28
  PYTHONPATH=~/keras-hub python bench/keras_hub_peer.py --size=mini --batch=32
  PYTHONPATH=~/keras-hub python bench/keras_hub_peer.py --size=base --batch=8

`--target=tpu:v5e-1` (or `gpu:h100x1`) compiles both steps at the same batch for that one
chip instead, without it, and prints the per-chip peak memory from its compiler
(bert_jax/run/targets.py; PYTHONPATH also holds requirements-targets.txt's folder, and
JAX_PLATFORMS=cpu keeps JAX from initialising the GPU plugin on a machine without a GPU).
keras-hub lowers for a target without its hardware: keras's JAX trainer's `train_step` is
a pure function of its state, so it is jitted on abstract arrays placed on the target's
chip. A target of several chips is refused (ours would need a mesh over them, keras's
step is one device's):

  PYTHONPATH=~/keras-hub:~/targets JAX_PLATFORMS=cpu python bench/keras_hub_peer.py \
      --size=mini --batch=32 --target=tpu:v5e-1
"""
import argparse
import os
import statistics
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # train_step
import train_step  # noqa: E402

from bert_jax.run import run_report  # noqa: E402

GIB = 2 ** 30


def keras_model(model_config):
  """keras-hub's BertMaskedLM of the model's shape, compiled with AdamW as ours runs."""
  import keras
  import keras_hub
  backbone = keras_hub.models.BertBackbone(
      vocabulary_size=model_config.vocab_size, num_layers=model_config.num_hidden_layers,
      num_heads=model_config.num_attention_heads, hidden_dim=model_config.hidden_size,
      intermediate_dim=model_config.intermediate_size,
      dropout=model_config.hidden_dropout_prob,
      max_sequence_length=model_config.max_position_embeddings,
      num_segments=model_config.type_vocab_size)
  model = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
  model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01,
                                                 epsilon=1e-6, global_clipnorm=1.0),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                weighted_metrics=[], jit_compile=True)
  return model


def keras_inputs(batch_np):
  """Our batch as BertMaskedLM's (x, y, sample_weight), on the device."""
  x = {"token_ids": batch_np["input_ids"], "segment_ids": batch_np["token_type_ids"],
       "padding_mask": batch_np["attention_mask"].astype(bool),
       "mask_positions": batch_np["masked_lm_positions"]}
  return (jax.tree.map(jnp.asarray, x), jnp.asarray(batch_np["masked_lm_ids"]),
          jnp.asarray(batch_np["masked_lm_weights"]))


def keras_runner(model, batch_np):
  x, y, weights = keras_inputs(batch_np)
  model.train_on_batch(x, y, sample_weight=weights)  # builds and compiles the step

  def run():
    model.train_on_batch(x, y, sample_weight=weights)
    jax.block_until_ready(model.trainable_variables[0].value)
  return run


def keras_target_peak(model, batch_np, target: str) -> dict:
  """The per-chip memory of keras's train step compiled for one chip of `target`: its
  stateless train_step (the function `fit` jits) lowered on that device's abstract arrays."""
  from bert_jax.run import targets
  device = targets.devices(target)[0]
  sharding = jax.sharding.SingleDeviceSharding(device)
  x, y, weights = keras_inputs(batch_np)
  model.train_on_batch(x, y, sample_weight=weights)  # builds the optimizer's variables
  state = tuple([v.value for v in group] for group in (
      model.trainable_variables, model.non_trainable_variables,
      model.optimizer.variables, model.metrics_variables))
  on_chip = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding)  # noqa: E731
  # State donated, as keras's JAX trainer jits it (donate_argnums=0): the new state may
  # reuse the old one's buffers, as ours does.
  compiled = jax.jit(model.train_step, donate_argnums=0).lower(
      jax.tree.map(on_chip, state), jax.tree.map(on_chip, (x, y, weights))).compile()
  return _memory(compiled)


def ours_target_peak(model_config, batch_size, seq, predictions, target: str) -> dict:
  """Our pretraining step (MLM alone) compiled for one chip of `target` (compile_report)."""
  from bert_jax.run import compile_report
  from configs import base
  config = base.get_config()
  config.model = dict(model_config.to_json_dict(), attention_probs_dropout_prob=0.1)
  config.objectives = "mlm"
  config.data.batch_size, config.data.max_seq_length = batch_size, seq
  config.data.max_predictions_per_seq = predictions
  for axis in ("data", "fsdp", "tensor"):
    config.mesh[axis] = 1
  _, lowered, _ = compile_report.lower_train_step(config, target)
  return _memory(lowered.compile())


def _memory(compiled) -> dict:
  memory = compiled.memory_analysis()
  peak = (memory.argument_size_in_bytes + memory.output_size_in_bytes -
          memory.alias_size_in_bytes + memory.temp_size_in_bytes)
  return {"peak_bytes": peak, "temp_bytes": memory.temp_size_in_bytes}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  train_step.add_shape_arguments(parser, warmup=1)
  parser.add_argument("--target", default="",
                      help="compile both steps for one chip of this target (tpu:v5e-1, "
                      "gpu:h100x1) and print their per-chip peak memory instead of timing")
  args = parser.parse_args()

  import keras
  import keras_hub
  from bert_jax.models.config import config_for_size
  if args.target:
    from bert_jax.run import targets
    chips = len(targets.devices(args.target))
    if chips != 1:
      parser.error(f"--target={args.target} has {chips} chips; both steps compile for one "
                   "chip: name a one-chip target (tpu:v5e-1, gpu:h100x1)")
  model_config = config_for_size(args.size, vocab_size=args.vocab)
  batch = train_step.make_batch(np.random.default_rng(0), args.batch, args.seq, args.vocab,
                                args.predictions)
  model = keras_model(model_config)
  head = (f"{args.size} (L{model_config.num_hidden_layers}/H{model_config.hidden_size}) "
          f"batch {args.batch} seq {args.seq} vocab {args.vocab}, {args.predictions} masked "
          f"a row, fp32, AdamW, dropout 0.1; keras {keras.__version__}, keras-hub "
          f"{keras_hub.__version__}, jax {jax.__version__}")
  if args.target:
    theirs = keras_target_peak(model, batch, args.target)
    mine = ours_target_peak(model_config, args.batch, args.seq, args.predictions, args.target)
    print(f"{head}; compiled for one chip of {args.target} (compiler facts)")
    for name, memory in (("ours", mine), ("keras-hub", theirs)):
      print(f"  {name + ':':12s} peak {memory['peak_bytes'] / GIB:7.3f} GiB per chip "
            f"({memory['temp_bytes'] / GIB:.3f} of it temporaries)")
    return
  ours_run, _, _ = train_step.ours(model_config, batch, objectives="mlm")
  keras_run = keras_runner(model, batch)
  ours_times, keras_times = train_step.alternate((ours_run, keras_run), args)
  tokens = args.batch * args.seq
  ours_tps = tokens / statistics.median(ours_times)
  keras_tps = tokens / statistics.median(keras_times)
  print(f"{head}; {run_report.device_description()}")
  print(f"  ours (JAX):          {ours_tps:10,.0f} tokens/s  (median of {len(ours_times)} "
        f"steps, {statistics.median(ours_times) * 1e3:.0f} ms/step)")
  print(f"  keras-hub (JAX):     {keras_tps:10,.0f} tokens/s  "
        f"({statistics.median(keras_times) * 1e3:.0f} ms/step)")
  print(f"  ratio ours/keras-hub: {ours_tps / keras_tps:9.2f}x")


if __name__ == "__main__":
  main()
