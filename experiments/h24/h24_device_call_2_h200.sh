#!/usr/bin/env bash
# h24 and d09 on the H200, in one call of the session's last 340 s of device time: build, then
# the kernel benchmark of h24 beside PyTorch's 16-bit kernels (its gate first: bench-kernels
# gates what this setup has not checked) at the study's shapes and the grid, three rounds as on
# the H100 (log 23); h24's GPU tests and the grid-shape tests; then, in what time is left, the
# decode benchmark of d09 beside PyTorch's kernels (flex-attention left out: compiling it takes
# minutes). The rows go to $OUT/results (for merge_results.py), each stage under a limit so the
# call ends before the budget does.
#   h24_device_call_2_h200.sh COMMIT   (the commit this tree is: the rows name it)
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
log=$OUT/h24_d09_h200.log
res=$OUT/results
quiet() { tr '\r' '\n' | grep -v "it/s\|s/it\|run/s\|s/run\|backend/s\|s/backend\|^ *$"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends h24,d09 2>&1 | tail -3 | tee -a $log
echo "== kernel benchmark (with h24's gate), at $SECONDS s" | tee -a $log
timeout 100 python -m harness bench-kernels --backends h24,sdpa-cudnn,sdpa-flash,sdpa-efficient \
  --dtypes bfloat16,float16 --rounds 3 --results-dir $res 2>&1 | quiet | tail -15 | tee -a $log
echo "== GPU tests, at $SECONDS s" | tee -a $log
timeout 60 python -m pytest -q -m gpu tests/test_versions_gpu.py -k "h24 or grid_shapes" -p no:cacheprovider \
  --maxfail=20 2>&1 | tail -8 | tee -a $log
echo "== decode benchmark (with d09's gate), at $SECONDS s" | tee -a $log
timeout $((250 - SECONDS)) python -m harness bench-decode \
  --backends d09,naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn --results-dir $res 2>&1 | quiet | tail -15 | tee -a $log
echo "done at $SECONDS s" | tee -a $log
