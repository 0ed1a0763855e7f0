#!/usr/bin/env bash
# Device call 2: the graph test again, then the decode benchmark's grid, one round.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
start=$SECONDS
python -m harness build --backends d01,d02,d03,d04,d05 2>&1 | tail -1
timeout 100 python -m pytest -q -m gpu tests/test_decode_gpu.py -p no:cacheprovider -k "graph or two_streams" 2>&1 | tail -4
echo "tests done at $((SECONDS-start)) s"
timeout 330 python -m harness bench-decode --backends naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,d01,d02,d03,d04,d05 --rounds 1 --skip-gate --results-dir $OUT/res > $OUT/bench.log 2>&1
grep -v "it/s\|s/it" $OUT/bench.log | tail -5
python experiments/tools/summarize_decode.py $OUT/res/*/decode.csv > $OUT/summary.txt
echo "bench done at $((SECONDS-start)) s"
timeout $((540-SECONDS+start)) python -m harness bench-decode --backends flex-attention,d05 --quick --rounds 1 --skip-gate --results-dir $OUT/flex > $OUT/flex.log 2>&1
grep -v "it/s\|s/it" $OUT/flex.log | tail -12
python experiments/tools/summarize_decode.py $OUT/flex/*/decode.csv
echo "flex done at $((SECONDS-start)) s"
