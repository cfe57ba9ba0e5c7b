#!/usr/bin/env bash
# The package without TensorFlow, as on a GPU image (CI runs it beside the tests):
#  1. a virtual environment of Python 3.12 ($PYTHON312, else pyenv's 3.12.1) with only what
#     such an image holds -- jax and jaxlib 0.11.2 (here the CPU build), and
#     requirements.txt's pins of flax, optax, orbax-checkpoint, numpy, safetensors,
#     tokenizers, sentencepiece, scipy, scikit-learn, matplotlib, huggingface-hub, absl-py
#     (with their own dependencies) -- plus the pure-Python wheels bench/device_check.sh's
#     header names, installed with --no-deps as they would be brought along; no
#     TensorFlow. It is kept in ~/.cache/bert_jax/tffree-<hash of both lists and the
#     interpreter>, so a rerun builds nothing (the tiny corpus and its tokens are kept
#     there too);
#  2. the package itself with --no-deps;
#  3. pretraining shards of the tiny config written by the calling (TensorFlow) environment
#     (bert_jax/pretrain/shards.py), then in the environment above: bash
#     bench/device_check.sh --dry with them (its small run from shards included), and a
#     tiny pretraining run from them through `python -m bert_jax.train`;
#  4. fine-tuning shards of configs/glue.py:dataset=cola,runlocal=True from all-MiniLM-L6-v2
#     (bert_jax/finetune/shards.py), written by the calling environment, then a fine-tuning
#     run from them in the environment above (no source file read: a data root that is not);
#  5. the wheels brought along, with their versions.
# Each phase's start is stamped with the seconds since the start.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"
stamp() { echo "== tf-free: [${SECONDS} s] $*"; }
PYTHON312="${PYTHON312:-$(PYENV_VERSION=3.12.1 pyenv which python3.12)}"
PIP_FLAGS=(--disable-pip-version-check --no-input -q)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The image's packages: requirements.txt's pins of those names, the image's jax.
IMAGE="flax|optax|orbax-checkpoint|numpy|safetensors|tokenizers|sentencepiece|scipy"
IMAGE="$IMAGE|scikit-learn|matplotlib|huggingface_hub|absl-py"
BROUGHT="ml-collections"  # bench/device_check.sh's header says why
{ echo "jax==0.11.2"; echo "jaxlib==0.11.2"; grep -E "^(${IMAGE})==" requirements.txt; } \
    > "$WORK/image.txt"
grep -E "^(${BROUGHT})==" requirements.txt > "$WORK/brought.txt"
KEY="$({ "$PYTHON312" -VV; cat "$WORK/image.txt" "$WORK/brought.txt"; } | sha1sum | cut -c1-12)"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/bert_jax/tffree-$KEY"
if [ ! -f "$VENV/.complete" ]; then  # built in place (a venv does not move), marked when done
  stamp "a $("$PYTHON312" -V) environment without TensorFlow: $VENV"
  rm -rf "$VENV" "${VENV%-*}"-*  # this one half built, or those of other lists
  "$PYTHON312" -m venv "$VENV"
  "$VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" -r "$WORK/image.txt"
  "$VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" --no-deps -r "$WORK/brought.txt"
  touch "$VENV/.complete"
fi
PY="$VENV/bin/python"
if "$PY" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in \
    ('tensorflow', 'tensorflow_text', 'tensorflow_datasets')))"; then :; else
  echo "$VENV holds TensorFlow" >&2
  exit 1
fi

stamp "the package, --no-deps"
mkdir "$WORK/src"  # a copy of the working tree: no build/ beside the tests CI runs meanwhile
git ls-files -z --cached --others --exclude-standard | tar -c --null -T - | tar -x -C "$WORK/src"
"$PY" -m pip install "${PIP_FLAGS[@]}" --no-deps "$WORK/src"

stamp "shards of configs/tiny.py:runlocal=True, written by $(python3 -V) with TensorFlow"
export BERT_JAX_DATA_DIR="$REPO/../shared/data" TF_CPP_MIN_LOG_LEVEL=2
CORPUS="$VENV/data/corpus.txt"  # prepared and tokenized once, kept with the environment
if [ ! -f "$CORPUS" ]; then
  mkdir -p "$VENV/data"
  python3 -m bert_jax.text.prepare --source=wikitext-2/valid.txt --output="$CORPUS.partial" \
      > /dev/null
  mv "$CORPUS.partial" "$CORPUS"
fi
TINY="configs/tiny.py:corpus=$CORPUS,runlocal=True"
python3 -m bert_jax.pretrain.shards --config="$TINY" --config.data.max_seq_length=32 \
    --config.data.max_predictions_per_seq=5 --config.data.cache_dir="$VENV/data/tokens" \
    --output="$WORK/shards/tiny" --epochs=2

stamp "bash bench/device_check.sh --dry, without TensorFlow"
PATH="$VENV/bin:$PATH" BERT_JAX_SHARDS="$WORK/shards/tiny-train-*.npz" \
    bash bench/device_check.sh --dry "$WORK/device_check.json"
"$PY" - "$WORK/device_check.json" <<'EOF'
import json
import sys

report = json.load(open(sys.argv[1]))
run = report["train_from_shards"]
assert not report["tensorflow_imported"] and "error" not in run, report
print(f"device check: {len(report['rows'])} rows; from shards {run['steps']} steps, loss "
      f"{run['first_loss']:.3f} -> {run['last_loss']:.3f}")
EOF

stamp "python -m bert_jax.train from the shards, without TensorFlow"
(cd "$WORK" && "$PY" -m bert_jax.train --config="$REPO/$TINY" --workdir="$WORK/run" \
    --config.data.shards="$WORK/shards/tiny-train-*.npz" \
    --config.data.eval_shards="$WORK/shards/tiny-eval.npz" --config.data.max_seq_length=32 \
    --config.data.max_predictions_per_seq=5 --config.model.hidden_size=32 \
    --config.model.intermediate_size=64 --config.model.num_attention_heads=2 \
    --config.num_train_steps=6 --config.eval_every_steps=6 --config.checkpoint_every_steps=6)
test -f "$WORK/run/eval_results.json"

COLA="configs/glue.py:dataset=cola,runlocal=True"  # 8,551 training rows to tokenize
stamp "fine-tuning shards of $COLA, written by $(python3 -V) with TensorFlow"
MINILM="$(python3 -c 'from bert_jax.configs.common import default_init_from as d; print(d())')"
if [ -z "$MINILM" ]; then
  echo "the fine-tuning run needs all-MiniLM-L6-v2 (bash scripts/setup.sh --test)" >&2
  exit 1
fi
python3 -m bert_jax.commands.finetune_shards --config="$COLA" --config.init_from="$MINILM" \
    --output="$WORK/shards/cola"

stamp "python -m bert_jax.train fine-tuning from the shards, without TensorFlow"
(cd "$WORK" && "$PY" -m bert_jax.train --config="$REPO/$COLA" --workdir="$WORK/cola" \
    --config.init_from="$MINILM" --config.data.shards="$WORK/shards/cola" \
    --config.data.data_dir="$WORK/no_data_root")
"$PY" - "$WORK/cola/eval_results.json" <<'EOF'
import json
import sys

results = json.load(open(sys.argv[1]))
print(f"fine-tuned from shards: step {results['step']}, eval_matthews_corrcoef "
      f"{results['eval_matthews_corrcoef']:.4f}")
EOF

stamp "done; the wheels brought along (--no-deps):"
"$PY" -m pip list --format=freeze 2>/dev/null | grep -iE "^(${BROUGHT//-/[-_]})==" \
    | paste -sd' '
