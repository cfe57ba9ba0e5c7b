#!/usr/bin/env bash
# A Cloud TPU VM slice for bert_jax: create it, install the package on every worker, run the
# same command on every worker, delete it. Each step is the gcloud command it prints first;
# --dry_run prints them and runs nothing.
#
#   bash scripts/tpu_vm.sh create  --name=bert --zone=us-central2-b --slice=v4-16 [--spot]
#   bash scripts/tpu_vm.sh install --name=bert --zone=us-central2-b
#   bash scripts/tpu_vm.sh run     --name=bert --zone=us-central2-b --slice=v4-16 -- \
#       bert-jax-train --config=base --workdir=gs://BUCKET/runs/base
#   bash scripts/tpu_vm.sh delete  --name=bert --zone=us-central2-b
#
# --slice is a TPU slice as --target names it: v4-N and v5p-N count TensorCores (two a
# chip), v5e-N and v6e-N chips. `install` builds a wheel of this checkout, copies it to every
# worker and installs it with the [tpu] extra. `run` adds --distributed=auto to
# bert-jax-train (every worker joins one job through the slice's metadata) and streams every
# worker's output back. On a slice of several hosts the workdir must be a gs:// URL: each
# host writes its shards of every checkpoint there, and a restarted slice (new VMs after a
# preemption) resumes from it; the corpus and data root must be a path every host sees (a
# bucket, or the same files on each worker's disk).
# Options: --project=ID (else gcloud's default), --version=RUNTIME (else the slice
# generation's TPU software version), --dry_run.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "tpu_vm.sh: error: $*" >&2; exit 2; }

STEP="${1:-}"
[[ "$STEP" =~ ^(create|install|run|delete)$ ]] || die "the first argument is a step: create, install, run or delete (got '${STEP}')"
shift
NAME="" ZONE="" SLICE="" PROJECT="" VERSION="" SPOT=0 DRY=0
COMMAND=()
while (($#)); do
  case "$1" in
    --name=*) NAME="${1#*=}" ;;
    --zone=*) ZONE="${1#*=}" ;;
    --slice=*) SLICE="${1#*=}" ;;
    --project=*) PROJECT="${1#*=}" ;;
    --version=*) VERSION="${1#*=}" ;;
    --spot) SPOT=1 ;;
    --dry_run) DRY=1 ;;
    --) shift; COMMAND=("$@"); break ;;
    *) die "unknown option '$1' (options: --name= --zone= --slice= --project= --version= --spot --dry_run, then -- COMMAND for run)" ;;
  esac
  shift
done
[ -n "$NAME" ] || die "--name= is required (the TPU VM's name)"
[ -n "$ZONE" ] || die "--zone= is required (e.g. us-central2-b for v4, us-west4-a for v5e)"

# --slice -> gcloud's accelerator type, the TPU software version, and the hosts it has.
ACCELERATOR="" HOSTS=1 CHIPS=1
parse_slice() {
  [[ "$SLICE" =~ ^(v4|v5p|v5e|v6e)-([0-9]+)$ ]] || die "--slice='${SLICE}': expected v4-N, v5p-N, v5e-N or v6e-N (e.g. v4-8, v5e-16)"
  local generation="${BASH_REMATCH[1]}" n="${BASH_REMATCH[2]}" chips per_host
  case "$generation" in
    v4|v5p) chips=$((n / 2)); per_host=4 ;;
    v5e|v6e) chips=$n; per_host=$([ "$n" = 8 ] && echo 8 || echo 4) ;;
  esac
  ((chips >= 1)) || die "--slice='${SLICE}': no whole chip"
  HOSTS=$(((chips + per_host - 1) / per_host)) CHIPS=$chips
  case "$generation" in
    v4) ACCELERATOR="v4-$n"; DEFAULT_VERSION="tpu-ubuntu2204-base" ;;
    v5p) ACCELERATOR="v5p-$n"; DEFAULT_VERSION="v2-alpha-tpuv5" ;;
    v5e) ACCELERATOR="v5litepod-$n"; DEFAULT_VERSION="v2-alpha-tpuv5-lite" ;;
    v6e) ACCELERATOR="v6e-$n"; DEFAULT_VERSION="v2-alpha-tpuv6e" ;;
  esac
}

GCLOUD=(gcloud compute tpus tpu-vm)
WHERE=("--zone=$ZONE")
[ -z "$PROJECT" ] || WHERE+=("--project=$PROJECT")

quote() {  # one word as a shell reads it: bare when safe, else in single quotes
  if [[ "$1" =~ ^[A-Za-z0-9_./:=@,+%-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
quoted() { local out="" word; for word in "$@"; do out+="${out:+ }$(quote "$word")"; done; printf '%s' "$out"; }
say_and_do() {  # prints the command as a shell would read it, then runs it (not on --dry_run)
  quoted "$@"
  echo
  ((DRY)) || "$@"
}

case "$STEP" in
  create)
    [ -n "$SLICE" ] || die "--slice= is required to create (e.g. --slice=v4-8)"
    parse_slice
    echo "# ${SLICE}: ${CHIPS} chips on ${HOSTS} host$( ((HOSTS > 1)) && echo s)"
    ARGS=("${GCLOUD[@]}" create "$NAME" "${WHERE[@]}" "--accelerator-type=$ACCELERATOR"
          "--version=${VERSION:-$DEFAULT_VERSION}")
    ((SPOT)) && ARGS+=(--spot)
    say_and_do "${ARGS[@]}"
    ;;
  install)
    if ((DRY)); then DIST="DIST"; else DIST="$(mktemp -d)"; fi
    say_and_do python -m pip wheel --no-deps -q -w "$DIST" .
    if ((DRY)); then WHEEL="$DIST/bert_jax-VERSION-py3-none-any.whl"
    else WHEEL="$(ls "$DIST"/bert_jax-*.whl)"; fi
    say_and_do "${GCLOUD[@]}" scp "$WHEEL" "$NAME:" "${WHERE[@]}" --worker=all
    say_and_do "${GCLOUD[@]}" ssh "$NAME" "${WHERE[@]}" --worker=all \
        "--command=python3 -m pip install -q $(quote "$(basename "$WHEEL")[tpu]")"
    ;;
  run)
    ((${#COMMAND[@]})) || die "run needs the command after --, e.g. -- bert-jax-train --config=base --workdir=gs://BUCKET/run"
    [ -n "$SLICE" ] || die "--slice= is required to run (how many hosts the command runs on)"
    parse_slice
    if [[ "${COMMAND[0]}" == "bert-jax-train" ]]; then
      WORKDIR=""
      for arg in "${COMMAND[@]}"; do [[ "$arg" == --workdir=* ]] && WORKDIR="${arg#*=}"; done
      if ((HOSTS > 1)) && [[ "$WORKDIR" != gs://* ]]; then
        die "--workdir='${WORKDIR}': a ${SLICE} slice has ${HOSTS} hosts, and each would write its checkpoint shards to its own disk: give a gs:// URL every host sees"
      fi
      [[ " ${COMMAND[*]} " == *" --distributed="* ]] || COMMAND+=(--distributed=auto)
    fi
    say_and_do "${GCLOUD[@]}" ssh "$NAME" "${WHERE[@]}" --worker=all "--command=$(quoted "${COMMAND[@]}")"
    ;;
  delete)
    say_and_do "${GCLOUD[@]}" delete "$NAME" "${WHERE[@]}" --quiet
    ;;
esac
