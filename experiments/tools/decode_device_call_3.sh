#!/usr/bin/env bash
# Device call 3: d06 and d07's GPU tests, then the grid beside d02/d05 and the baselines, one round.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
start=$SECONDS
python -m harness build --backends d02,d05,d06,d07 2>&1 | tail -1
timeout 120 python -m pytest -q -m gpu tests/test_decode_gpu.py -p no:cacheprovider -k "d06 or d07" 2>&1 | tail -4
echo "tests done at $((SECONDS-start)) s"
timeout 300 python -m harness bench-decode --backends naive,sdpa-efficient,sdpa-flash,sdpa-cudnn,d02,d05,d06,d07 --rounds 1 --skip-gate --results-dir $OUT/res > $OUT/bench.log 2>&1
grep -v "it/s\|s/it\|run/s" $OUT/bench.log | tail -5
python experiments/tools/summarize_decode.py $OUT/res/*/decode.csv > $OUT/summary.txt
echo "bench done at $((SECONDS-start)) s"
