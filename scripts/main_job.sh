#!/usr/bin/env bash
# The main job on a fresh machine: set up, turn the real text of ../shared/data into the
# plain pretraining format, pretrain BERT-Tiny on it (CPU, minutes), and print the result.
# Re-running resumes from runs/tiny (a finished run just reports again).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python -m bert_jax.data.prepare --output=runs/corpus/pretrain.txt
python -m bert_jax.train --config=configs/tiny.py --workdir=runs/tiny "$@"
