#!/usr/bin/env bash
# The whole study on this machine's GPU:
#   build -> correctness gate -> kernel benchmark -> end-to-end sweep -> plots -> README tables
# Results go to results/<gpu>/ (appended row by row; a rerun resumes where it stopped),
# plots to plots/<gpu>/, tables into README.md and versions/*/README.md.
set -euo pipefail
cd "$(dirname "$0")"

usage() {
  cat <<'USAGE'
Usage: ./run_all.sh [--quick] [--backends a,b,...] [--plots-only] [--fresh]

  --quick             a few shapes and token counts (a couple of minutes on an H100)
  --backends LIST     only these backends, e.g. naive,sdpa-efficient,v10,v11 (default: all)
  --plots-only        redraw plots and README tables from the committed CSVs (no GPU needed)
  --fresh             measure again what this setup (GPU, driver, torch, commit) already has
  -h, --help          this help
USAGE
}

quick=() backends=all plots_only=0 fresh=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --backends) [[ $# -ge 2 ]] || { echo "--backends needs a value" >&2; exit 2; }; backends="$2"; shift ;;
    --backends=*) backends="${1#*=}" ;;
    --plots-only) plots_only=1 ;;
    --fresh) fresh=(--fresh) ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

PYTHON="${PYTHON:-python3}"
# Use what is installed; install only what does not import (GPU machines may have no registry).
if ! "$PYTHON" -c "import torch, pandas, matplotlib, tiktoken, safetensors, tqdm" 2>/dev/null; then
  echo "installing the project's dependencies (pip install -e .)"
  "$PYTHON" -m pip install -e .
fi
export PYTHONUNBUFFERED=1

step() { printf '\n== %s\n' "$*"; }

if [[ $plots_only -eq 0 ]]; then
  if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "run_all.sh: no CUDA device is available. The sweep needs a GPU;" \
         "use --plots-only to redraw plots and tables from the committed CSVs." >&2
    exit 2
  fi
  start=$SECONDS
  step "build"
  "$PYTHON" -m harness build --backends "$backends"
  step "correctness gate (a backend that fails is reported and left out of the timings)"
  "$PYTHON" -m harness check --backends "$backends" || echo "some backends failed the gate: see above"
  step "kernel benchmark"
  "$PYTHON" -m harness bench-kernels --backends "$backends" "${quick[@]}" "${fresh[@]}"
  step "end-to-end sweep"
  "$PYTHON" -m harness bench-e2e --backends "$backends" "${quick[@]}" "${fresh[@]}"
  echo "measurements took $((SECONDS - start)) s"
fi
step "plots"
"$PYTHON" -m harness plot
step "README tables"
"$PYTHON" -m harness report
