#!/usr/bin/env bash
# d10 on one GPU: build; the decode GPU tests of d10 (the tile blocks' ragged case included);
# with SANITIZE=1, compute-sanitizer memcheck and racecheck over the GPU test that takes the
# tile blocks (every dtype; d09's kernels are unchanged and were sanitized before); then the
# decode benchmark (d10's gate first) of d10, d09 and PyTorch's kernels but flex-attention
# (minutes of compiling), two rounds, rows to $OUT/results.
#   device_call_1.sh COMMIT   (the commit this tree is: the rows name it)
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
log=$OUT/d10.log
quiet() { tr '\r' '\n' | grep -v "it/s\|s/it\|run/s\|s/run\|backend/s\|s/backend\|^ *$"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d10,d09 2>&1 | tail -2 | tee -a $log
echo "== decode GPU tests of d10, at $SECONDS s" | tee -a $log
timeout 150 python -m pytest -q -m gpu tests/test_decode_gpu.py -k d10 -p no:cacheprovider --maxfail=20 2>&1 \
  | tail -15 | tee -a $log
if [[ -n "${SANITIZE:-}" ]]; then  # d09's kernels are unchanged (sanitized before): the tile blocks
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool over the tile blocks' case (B=24 S=2177 ragged), at $SECONDS s" | tee -a $log
    timeout 150 compute-sanitizer --tool $tool --print-limit 20 python -m pytest -q -m gpu \
      tests/test_decode_gpu.py -k "d10 and B24" -p no:cacheprovider 2>&1 \
      | grep "ERROR SUMMARY\|RACECHECK SUMMARY\|Hazard\|Invalid\|passed\|failed" | head -20 | tee -a $log
  done
fi
echo "== decode benchmark (d10's gate first), at $SECONDS s" | tee -a $log
timeout $((560 - SECONDS)) python -m harness bench-decode \
  --backends d10,d09,naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn --results-dir $OUT/results 2>&1 \
  | quiet | tail -25 | tee -a $log
echo "done at $SECONDS s" | tee -a $log
