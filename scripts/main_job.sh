#!/usr/bin/env bash
# The main job on a fresh machine: set up, fetch the data root's files it reads when they are
# missing (bert_jax.commands.download, one line then), turn the real text of the data root into the
# plain pretraining format, learn a byte-level BPE vocabulary from it, count word vectors
# from it (PPMI + SVD, seconds), pretrain ModernBERT-Tiny on it (configs/modernbert.py;
# CPU, minutes) starting its word table from those vectors at std 0.1, show its MLM head's
# guesses for two masks, then fine-tune that model on SST-2 (8,000 training sentences,
# 3 epochs; dev accuracy) and, as the baseline pretraining has to beat, the same model
# from random weights (config.random_init), each with fine-tuning seeds 0, 1, 2, printing
# both sides' dev accuracies (mean [range]), whether the ranges are apart, and each seed's
# pretrained - random difference (a seed draws both sides' training subset and order).
# Re-running resumes from runs/modernbert_vectors and runs/modernbert_vectors_sst2_*
# (finished runs just report again). Arguments go to the pretraining command (e.g.
# --config.num_train_steps=200).
#
# QUICK=1 runs every step on a small scale (about 3 minutes once installed; CI runs it in a
# clean virtual environment): one text source (wikitext-2 valid), a 2,000-entry
# vocabulary, 6 held-out documents, 30 pretraining steps, fine-tuning seed 0 on 300 sentences for one epoch;
# everything under runs/quick/. Its accuracies say nothing: it proves the steps run.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=runs
SOURCES=()  # all the pretraining text of the data root
DATASETS=(pretraining_text sst2)  # what the steps read (bert_jax.commands.download fetches any missing)
VOCAB_SIZE=8192
TRAIN_EXAMPLES=8000
EXTRA_CORPUS=()  # overrides of the corpus' config, for the vectors and the pretraining
EXTRA_PRETRAIN=()
EXTRA_FINETUNE=()
if [ "${QUICK:-0}" = 1 ]; then
  RUNS=runs/quick
  SOURCES=(--source=wikitext-2/valid.txt)
  DATASETS=(wikitext2 sst2)
  VOCAB_SIZE=2000
  TRAIN_EXAMPLES=300
  EXTRA_CORPUS=(--config.data.eval_held_out_docs=6)  # of its 60 documents
  EXTRA_PRETRAIN=(--config.num_train_steps=30 --config.eval_every_steps=30
                  --config.eval_batches=2 --config.log_every_steps=10)
  EXTRA_FINETUNE=(--config.num_train_epochs=1)
  SEEDS="${SEEDS:-0}"
fi
SEEDS="${SEEDS:-0 1 2}"  # fine-tuning seeds, each side (SEEDS=0 for a quicker look)
MODEL="$RUNS/modernbert_vectors"
VOCAB="$RUNS/corpus/bpe-$((VOCAB_SIZE / 1000))k"  # runs/corpus/bpe-8k: configs/modernbert.py's default
CONFIG="configs/modernbert.py:corpus=$RUNS/corpus/pretrain.txt,vocab=$VOCAB,vocab_size=$VOCAB_SIZE"
# The fine-tunings of one seed compile the same programs: XLA's persistent cache keeps them.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$PWD/runs/xla_cache}"
bash scripts/setup.sh
python -m bert_jax.commands.download --quiet "${DATASETS[@]}"  # silent when the data root has them
python -m bert_jax.text.prepare "${SOURCES[@]}" --output="$RUNS/corpus/pretrain.txt"
python -m bert_jax.text.learn_vocab --kind=bpe --input="$RUNS/corpus/pretrain.txt" \
    --vocab_size="$VOCAB_SIZE" --output="$VOCAB"
[ -f "$VOCAB-vectors.npz" ] || python -m bert_jax.pretrain.word_vectors \
    --config="$CONFIG" "${EXTRA_CORPUS[@]}" --output="$VOCAB-vectors.npz"
python -m bert_jax.train --config="$CONFIG" "${EXTRA_CORPUS[@]}" \
    --config.init_word_vectors="$VOCAB-vectors.npz" \
    --config.init_word_vectors_std=0.1 --workdir="$MODEL" "${EXTRA_PRETRAIN[@]}" "$@"
python -m bert_jax.commands.fill_mask --model="$MODEL" \
    "he said that <mask> was the best <mask> of the year ."
for seed in $SEEDS; do
  for init in pretrained random; do
    extra=()
    if [ "$init" = random ]; then extra=(--config.random_init=true); fi
    python -m bert_jax.train --config="configs/glue.py:dataset=sst2,train_examples=$TRAIN_EXAMPLES" \
        --config.init_from="$MODEL" "${extra[@]}" "${EXTRA_FINETUNE[@]}" \
        --config.data.max_seq_length=64 --config.optim.learning_rate=5e-4 \
        --config.seed="$seed" --config.data.seed="$seed" \
        --workdir="${MODEL}_sst2_${init}_s${seed}"
  done
done
SEEDS="$SEEDS" MODEL="$MODEL" TRAIN_EXAMPLES="$TRAIN_EXAMPLES" python - <<'PY'
import json
import os

seeds = os.environ["SEEDS"].split()
acc = {init: [100 * json.load(open(f"{os.environ['MODEL']}_sst2_{init}_s{s}/eval_results.json"))
              ["eval_accuracy"] for s in seeds] for init in ("pretrained", "random")}
cell = lambda a: f"{sum(a) / len(a):.2f} [{min(a):.2f}, {max(a):.2f}]"  # noqa: E731
print(f"SST-2 dev accuracy (%), {int(os.environ['TRAIN_EXAMPLES']):,} training sentences, "
      f"fine-tuning seeds {' '.join(seeds)}:")
for init, name in (("pretrained", "pretrained here"), ("random", "random init")):
  print(f"  {name:16s} {cell(acc[init])}  (" + ", ".join(f"{a:.2f}" for a in acc[init]) + ")")
gap = sum(acc["pretrained"]) / len(seeds) - sum(acc["random"]) / len(seeds)
verdict = ("pretrained above random init on every seed, by more than the seeds' spread"
           if min(acc["pretrained"]) > max(acc["random"]) else
           "random init above on every seed" if max(acc["pretrained"]) < min(acc["random"])
           else "the seeds' ranges overlap")
print(f"  gap {gap:+.2f} points: {verdict}")
# A seed draws both sides' training subset, order and head: compare each with its twin too.
diffs = [p - r for p, r in zip(acc["pretrained"], acc["random"])]
print("  paired by seed (pretrained - random init, same subset and order): "
      + ", ".join(f"{d:+.2f}" for d in diffs)
      + f"; pretrained above on {sum(d > 0 for d in diffs)} of {len(diffs)} seeds")
PY
