#!/usr/bin/env bash
# The main job on a fresh machine: set up, turn the real text of ../shared/data into the
# plain pretraining format, learn a byte-level BPE vocabulary from it, count word vectors
# from it (PPMI + SVD, seconds), pretrain ModernBERT-Tiny on it (configs/modernbert.py;
# CPU, minutes) starting its word table from those vectors at std 0.1, show its MLM head's
# guesses for two masks, then fine-tune that model on SST-2 (8,000 training sentences,
# 3 epochs; dev accuracy) and, as the baseline pretraining has to beat, the same model
# from random weights (config.random_init), printing both dev accuracies.
# Re-running resumes from runs/modernbert_vectors and runs/modernbert_vectors_sst2*
# (finished runs just report again). Arguments go to the pretraining command (e.g.
# --config.num_train_steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt
python -m bert_jax.text.learn_vocab --kind=bpe --input=runs/corpus/pretrain.txt \
    --vocab_size=8192 --output=runs/corpus/bpe-8k
[ -f runs/corpus/bpe-8k-vectors.npz ] || python -m bert_jax.pretrain.word_vectors \
    --config=configs/modernbert.py --output=runs/corpus/bpe-8k-vectors.npz
python -m bert_jax.train --config=configs/modernbert.py \
    --config.init_word_vectors=runs/corpus/bpe-8k-vectors.npz \
    --config.init_word_vectors_std=0.1 --workdir=runs/modernbert_vectors "$@"
python -m bert_jax.fill_mask --model=runs/modernbert_vectors \
    "he said that <mask> was the best <mask> of the year ."
python -m bert_jax.train --config=configs/glue.py:task=sst2,train_examples=8000 \
    --config.init_from=runs/modernbert_vectors --config.data.max_seq_length=64 \
    --config.optim.learning_rate=5e-4 --workdir=runs/modernbert_vectors_sst2
python -m bert_jax.train --config=configs/glue.py:task=sst2,train_examples=8000 \
    --config.init_from=runs/modernbert_vectors --config.random_init=true \
    --config.data.max_seq_length=64 --config.optim.learning_rate=5e-4 \
    --workdir=runs/modernbert_vectors_sst2_random
python - <<'PY'
import json
acc = {name: json.load(open(f"runs/{name}/eval_results.json"))["eval_accuracy"]
       for name in ("modernbert_vectors_sst2", "modernbert_vectors_sst2_random")}
print(f"SST-2 dev accuracy, 8,000 training sentences: pretrained here "
      f"{acc['modernbert_vectors_sst2']:.4f}, random init "
      f"{acc['modernbert_vectors_sst2_random']:.4f}")
PY
