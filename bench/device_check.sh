#!/usr/bin/env bash
# The pretraining step measured on the machine's accelerator beside its compile-only plan
# (bench/device_check.py); under 8 minutes on one GPU.
#
#   bash bench/device_check.sh           # bench/results/device_check_<device>_<date>_<commit>.json
#   bash bench/device_check.sh --dry [OUT]     # CPU, tiny shapes, the same code path
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2
if [[ "${1:-}" == "--dry" ]]; then
  JAX_PLATFORMS=cpu python bench/device_check.py --dry --output "${2:-/tmp/device_check_dry.json}"
  exit
fi
kind=$(python -c "import jax; print(jax.devices()[0].device_kind.replace(' ', '_'))")
out="bench/results/device_check_${kind}_$(date -u +%Y%m%d)_$(git rev-parse --short HEAD).json"
timeout 480 python bench/device_check.py --output "$out" "$@"
