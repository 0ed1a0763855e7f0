#!/usr/bin/env bash
# d08's second device call: the probe again (d08 with its merge by stores into block 0, the
# reading alone beside it), then the decode benchmark of d07, d08 and the 16-bit SDPA kernels
# (bfloat16) and the float32 baselines (float32) in one run. Output to $OUT.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/probe.log
nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a -I../../versions/common decode_probe.cu d07_entry.cu \
  -o /tmp/decode_probe 2>&1 | grep -v "^$" | tee -a $OUT/probe.log
timeout 200 /tmp/decode_probe 2>&1 | tee -a $OUT/probe.log
cd ../..
timeout 100 python -m harness build --backends d07,d08 2>&1 | tail -2 | tee $OUT/bench.log
timeout 200 python -m harness bench-decode --backends sdpa-cudnn,sdpa-flash,d07,d08 --dtypes bfloat16 \
  --results-dir /tmp/r 2>&1 | tr '\r' '\n' | grep -v "it/s\|s/it\|^ *$" | tail -5 | tee -a $OUT/bench.log
timeout 150 python -m harness bench-decode --backends naive,sdpa-efficient,sdpa-math,d07,d08 --dtypes float32 \
  --results-dir /tmp/r 2>&1 | tr '\r' '\n' | grep -v "it/s\|s/it\|^ *$" | tail -5 | tee -a $OUT/bench.log
python experiments/tools/summarize_decode.py /tmp/r/*/decode.csv > $OUT/bench_table.txt 2>&1
cp /tmp/r/*/decode.csv $OUT/
