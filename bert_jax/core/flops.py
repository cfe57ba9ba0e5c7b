"""FLOPs of a step of any family from the model shapes, and the device peak they are
measured against.

MFU = model FLOPs per step / step time / (peak FLOP/s per device x devices). Model FLOPs
count the matmuls (2 per multiply-add) of the forward pass, times 3 for training (the
backward pass costs about twice the forward); elementwise work is ignored, as usual.
What the family changes: the E -> H embedding projection and H -> E MLM transform when
E != H (ALBERT, ELECTRA); the feed-forward's matmuls (GeGLU's input projection is 2I wide:
ModernBERT); the keys each query attends to (ModernBERT's local layers: the window's
local_attention + 1, not T; model FLOPs count the window even where the kernel computes
the full T x T and masks it; Reformer's chunk and its neighbours, per hash round).
Shared layers (ALBERT) cost what unshared ones do.
"""
import dataclasses
import functools
import time
from typing import Callable

import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.modernbert import is_global_layer

# Dense peak FLOP/s per device (chip), bf16 (TPU figures are per chip).
_PEAKS_BF16 = {
    "TPU v4": 275e12, "TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v5p": 459e12,
    "TPU v5": 459e12, "TPU v6 lite": 918e12, "TPU v6e": 918e12,
    "A100": 312e12, "H100": 989e12, "H200": 989e12,
}
# fp32 is not the same: GPUs without TF32 and CPUs differ; fall back to a measurement.
_PEAKS_FP32 = {"A100": 19.5e12, "H100": 67e12, "H200": 67e12}


def _all_keys(config: BertConfig, layer: int, seq: int) -> int:
  del config, layer
  return seq


def _reformer_keys(config: BertConfig, layer: int, seq: int) -> int:
  """A chunk and its neighbours; LSH: that in each hash round."""
  if config.attn_layers[layer] == "lsh":
    chunk = config.lsh_attn_chunk_length
    seen = (1 + config.lsh_num_chunks_before + config.lsh_num_chunks_after) * chunk
    return config.num_hashes * min(seq, seen) if seq > chunk else seq
  chunk = config.local_attn_chunk_length
  seen = (1 + config.local_num_chunks_before + config.local_num_chunks_after) * chunk
  return min(seq, seen) if seq > chunk else seq




def _local_or_global_keys(config: BertConfig, layer: int, seq: int) -> int:
  """A global layer's query sees all T keys, a local layer's its window."""
  return seq if is_global_layer(config, layer) else min(seq, config.local_attention + 1)


@dataclasses.dataclass(frozen=True)
class LayerShape:
  """What an architecture's layer costs, for the FLOP count.

  Attributes:
    ffn_matrices: feed-forward matrices of H x I per layer: in + out (BERT's layers), or
      GeGLU's 2I-wide input + out (ModernBERT's: 3).
    keys_per_query: (config, layer, T) -> the keys one query attends to in that layer.
  """
  ffn_matrices: int
  keys_per_query: Callable[[BertConfig, int, int], int]


# The `Family.architecture` names (bert_jax.models.bert.ARCHITECTURES) -> their layer cost.
LAYER_SHAPES = {"bert": LayerShape(2, _all_keys),
                "modernbert": LayerShape(3, _local_or_global_keys),
                "reformer": LayerShape(2, _reformer_keys)}


def layer_shape(config: BertConfig) -> LayerShape:
  architecture = family_of(config).architecture
  if architecture not in LAYER_SHAPES:
    raise ValueError(f"family {config.family!r}: architecture {architecture!r} has no FLOP "
                     f"count (bert_jax.core.flops.LAYER_SHAPES has {sorted(LAYER_SHAPES)})")
  return LAYER_SHAPES[architecture]


def encoder_forward_flops(config: BertConfig, batch: int, seq: int) -> float:
  """Matmul FLOPs of one forward pass of the encoder (+ pooler)."""
  h, i, e = config.hidden_size, config.intermediate_size, config.embedding_width
  tokens = batch * seq
  shape = layer_shape(config)
  ffn = shape.ffn_matrices
  per_token_layer = 2 * (4 * h * h + ffn * h * i)  # q, k, v, out projections + FFN
  total = 0.0
  for layer in range(config.num_hidden_layers):
    attention = 2 * 2 * shape.keys_per_query(config, layer, seq) * h  # scores and context
    total += tokens * (per_token_layer + attention)
  projection = 2 * e * h * tokens if config.projects_embeddings else 0
  pooler = 2 * h * h * batch
  return total + projection + pooler


def mlm_forward_flops(config: BertConfig, batch: int, seq: int, predictions: int) -> float:
  """Matmul FLOPs of one forward pass of the encoder and its MLM head at `predictions`
  positions a row (a distillation teacher's share of a step: no backward)."""
  h, v, e = config.hidden_size, config.vocab_size, config.embedding_width
  mlm = batch * predictions * 2 * (h * e + e * v)  # transform H -> E, decoder E -> V
  return encoder_forward_flops(config, batch, seq) + mlm


def pretraining_step_flops(config: BertConfig, batch: int, seq: int, predictions: int) -> float:
  """Training FLOPs of one MLM (sparse, `predictions` per sequence) + NSP step."""
  nsp = batch * 2 * config.hidden_size * 2
  return 3.0 * (mlm_forward_flops(config, batch, seq, predictions) + nsp)


@functools.cache
def measured_matmul_peak(n: int = 1024, repeats: int = 20) -> float:
  """FLOP/s of a plain float32 [n, n] @ [n, n] on the default device, the best of `repeats`
  (~0.1-0.5 s on a CPU). Best of 3 read a CPU shared with another run at a fraction of its
  peak, and a run report then printed an MFU above 100%."""
  a = jnp.ones((n, n), jnp.float32)
  dot = jax.jit(lambda x: x @ x)
  dot(a).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    dot(a).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best


def peak_flops(device_kind: str, dtype: str = "bfloat16") -> float | None:
  """The published dense peak FLOP/s of a device kind ("TPU v5 lite", "NVIDIA H100 80GB
  HBM3", ...) for the dtype; None where it is not known."""
  table = _PEAKS_BF16 if dtype == "bfloat16" else _PEAKS_FP32
  for name, peak in table.items():
    if name.lower() in device_kind.lower():
      return peak
  return None


def device_peak_flops(dtype: str = "bfloat16") -> float:
  """Known peak of this device kind for the dtype, else a measured matmul peak."""
  return peak_flops(jax.devices()[0].device_kind, dtype) or measured_matmul_peak()
