#!/usr/bin/env bash
# d10 after its tiles were kept to 16-bit types (float32 takes d09's kernels again): build,
# d10's float32 GPU tests, then the float32 decode benchmark (d10's gate first) of d10, d09
# and PyTorch's float32 kernels but flex-attention, rows to $OUT/results.
#   device_call_2.sh COMMIT   (the commit this tree is: the rows name it)
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
log=$OUT/d10_float32.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d10,d09 2>&1 | tail -1 | tee -a $log
timeout 100 python -m pytest -q -m gpu tests/test_decode_gpu.py -k "d10 and float32" -p no:cacheprovider 2>&1 \
  | tail -1 | tee -a $log
timeout 300 python -m harness bench-decode --dtypes float32 \
  --backends d10,d09,naive,sdpa-math,sdpa-efficient --results-dir $OUT/results 2>&1 \
  | tr '\r' '\n' | grep "HBM\|rows in\|rror" | tee -a $log
echo "done at $SECONDS s" | tee -a $log
