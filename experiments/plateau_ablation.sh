#!/usr/bin/env bash
# The tiny model's unigram plateau: which change ends it within 800 steps? One run after
# another on this CPU (~4 min each with the learned 8k vocab); the README's table
# (Results, "Leaving the MLM plateau") comes from these runs.
#
#   bash experiments/plateau_ablation.sh               # every run below
#   bash experiments/plateau_ablation.sh baseline guided_layer0
#
# Needs the prepared corpus and a learned vocab (as in scripts/main_job.sh):
#   python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt
#   python -m bert_jax.text.learn_vocab --input=runs/corpus/pretrain.txt --vocab_size=8192 \
#       --output=runs/corpus/vocab-8k.txt
# Each run writes runs/plateau/NAME/ (metrics.jsonl; eval rows at steps 400 and 800).
set -euo pipefail
cd "$(dirname "$0")/.."
vocab=$PWD/runs/corpus/vocab-8k.txt
vocab_size=$(wc -l < "$vocab")
COMMON="--config=configs/tiny.py --config.data.vocab_path=$vocab --config.model.vocab_size=$vocab_size
  --config.num_train_steps=800 --config.eval_every_steps=400 --config.checkpoint_every_steps=100000
  --config.data.eval_held_out_docs=20 --config.eval_batches=10"
OFF="--config.attention_guidance.weight=0"

declare -A RUNS=(
  [baseline]="$OFF"
  [pre_ln]="$OFF --config.model.pre_layer_norm=true"
  [pre_ln_lr5e-3]="$OFF --config.model.pre_layer_norm=true --config.optim.learning_rate=5e-3"
  [heads8]="$OFF --config.model.num_attention_heads=8"
  [mini]="$OFF --config.model.num_hidden_layers=4 --config.model.hidden_size=256 --config.model.num_attention_heads=4 --config.model.intermediate_size=1024 --config.optim.learning_rate=1e-3"
  [guided_all_layers]="--config.attention_guidance.weight=1 --config.attention_guidance.layers="
  [guided_layer0]="--config.attention_guidance.weight=1 --config.attention_guidance.layers=0"
)
ORDER=(baseline pre_ln pre_ln_lr5e-3 heads8 mini guided_all_layers guided_layer0)

for name in "${@:-${ORDER[@]}}"; do
  if [[ -z "${RUNS[$name]+x}" ]]; then
    echo "unknown run $name (have: ${ORDER[*]})" >&2
    exit 2
  fi
  rm -rf "runs/plateau/$name"
  # shellcheck disable=SC2086
  python -m bert_jax.train $COMMON ${RUNS[$name]} --workdir="runs/plateau/$name"
  python - "runs/plateau/$name" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
for r in rows:
  if "eval_mlm_accuracy" in r:
    print(f"{sys.argv[1]} step {r['step']}: held-out MLM accuracy {r['eval_mlm_accuracy']:.3f}, "
          f"at corrupted positions {r['eval_mlm_accuracy_corrupted']:.3f}, "
          f"NSP {r['eval_nsp_accuracy']:.3f}")
PY
done
