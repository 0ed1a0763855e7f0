#!/usr/bin/env bash
# Device call 1: build the decode versions, their GPU tests, a first decode benchmark.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
start=$SECONDS
python -m harness build --backends d01,d02,d03,d04,d05 2>&1 | tail -8
echo "build done at $((SECONDS-start)) s"
timeout 220 python -m pytest -q -m gpu tests/test_decode_gpu.py -p no:cacheprovider --maxfail=40 2>&1 | tail -40 > $OUT/tests.log
cat $OUT/tests.log | tail -25
echo "tests done at $((SECONDS-start)) s"
timeout 220 python -m harness bench-decode --backends naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,d01,d02,d03,d04,d05 --rounds 1 --skip-gate --results-dir $OUT/res > $OUT/bench.log 2>&1
tail -5 $OUT/bench.log
python experiments/tools/summarize_decode.py $OUT/res/*/decode.csv | tee $OUT/summary.txt
echo "bench done at $((SECONDS-start)) s"
timeout $((560-SECONDS+start)) python -m harness bench-decode --backends flex-attention,d05 --quick --rounds 1 --skip-gate --results-dir $OUT/flex > $OUT/flex.log 2>&1
tail -12 $OUT/flex.log
echo "flex done at $((SECONDS-start)) s"
