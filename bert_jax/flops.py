"""FLOPs of a BERT step from the model shapes, and the device peak they are measured against.

MFU = model FLOPs per step / step time / (peak FLOP/s per device x devices). Model FLOPs
count the matmuls (2 per multiply-add) of the forward pass, times 3 for training (the
backward pass costs about twice the forward); elementwise work is ignored, as usual.
"""
import functools
import time

import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig

# Dense peak FLOP/s per device (chip), bf16 (TPU figures are per chip).
_PEAKS_BF16 = {
    "TPU v4": 275e12, "TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v5p": 459e12,
    "TPU v5": 459e12, "TPU v6 lite": 918e12, "TPU v6e": 918e12,
    "A100": 312e12, "H100": 989e12, "H200": 989e12,
}
# fp32 is not the same: GPUs without TF32 and CPUs differ; fall back to a measurement.
_PEAKS_FP32 = {"A100": 19.5e12, "H100": 67e12, "H200": 67e12}


def encoder_forward_flops(config: BertConfig, batch: int, seq: int) -> float:
  """Matmul FLOPs of one forward pass of the encoder (+ pooler)."""
  h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
  tokens = batch * seq
  per_token_layer = 2 * (4 * h * h + 2 * h * i)  # q, k, v, out projections + FFN
  attention = 2 * 2 * seq * h  # scores and context, per token per layer
  pooler = 2 * h * h * batch
  return layers * tokens * (per_token_layer + attention) + pooler


def pretraining_step_flops(config: BertConfig, batch: int, seq: int, predictions: int) -> float:
  """Training FLOPs of one MLM (sparse, `predictions` per sequence) + NSP step."""
  h, v = config.hidden_size, config.vocab_size
  mlm = batch * predictions * 2 * (h * h + h * v)
  nsp = batch * 2 * h * 2
  return 3.0 * (encoder_forward_flops(config, batch, seq) + mlm + nsp)


@functools.cache
def measured_matmul_peak(n: int = 1024, repeats: int = 3) -> float:
  """FLOP/s of a plain float32 [n, n] @ [n, n] on the default device (best of a few)."""
  a = jnp.ones((n, n), jnp.float32)
  dot = jax.jit(lambda x: x @ x)
  dot(a).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    dot(a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best


def device_peak_flops(dtype: str = "bfloat16") -> float:
  """Known peak of this device kind for the dtype, else a measured matmul peak."""
  kind = jax.devices()[0].device_kind
  table = _PEAKS_BF16 if dtype == "bfloat16" else _PEAKS_FP32
  for name, peak in table.items():
    if name.lower() in kind.lower():
      return peak
  return measured_matmul_peak()
