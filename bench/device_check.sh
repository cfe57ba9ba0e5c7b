#!/usr/bin/env bash
# The pretraining and fine-tuning steps measured on the machine's accelerator beside their
# compile-only plan, and a small pretraining run from pre-tokenized shards
# (bench/device_check.py); under 8 minutes on one GPU.
#
#   bash bench/device_check.sh           # bench/results/device_check_<device>_<date>_<commit>.json
#   bash bench/device_check.sh --dry [OUT]     # CPU, tiny shapes, the same code path
#   BERT_JAX_SHARDS='runs/shards/tiny-train-*.npz' bash bench/device_check.sh   # + the run
#
# No TensorFlow: it runs on a GPU image with Python 3.12, jax + its CUDA plugin, flax,
# optax, orbax-checkpoint, numpy, safetensors, tokenizers, sentencepiece, scipy,
# scikit-learn, matplotlib, huggingface-hub and absl-py, plus one pure-Python wheel brought
# along and installed with --no-deps (scripts/tf_free_check.sh proves it on the CPU):
#   ml-collections  the configs (ConfigDict, FieldReference) and config flags; 0.1 MB
# (tensorboard is not needed: bert_jax/run/metric_writers.py encodes its event files itself.)
# The shards (bert_jax/pretrain/shards.py) are written beforehand where TensorFlow is.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2
shards=(--shards "${BERT_JAX_SHARDS:-}")
if [[ "${1:-}" == "--dry" ]]; then
  JAX_PLATFORMS=cpu python bench/device_check.py --dry --output "${2:-/tmp/device_check_dry.json}" \
      "${shards[@]}"
  exit
fi
kind=$(python -c "import jax; print(jax.devices()[0].device_kind.replace(' ', '_'))")
out="bench/results/device_check_${kind}_$(date -u +%Y%m%d)_$(git rev-parse --short HEAD).json"
timeout 480 python bench/device_check.py --output "$out" "${shards[@]}" "$@"
