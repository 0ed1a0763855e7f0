#!/usr/bin/env bash
# d09's device call: the probe with d09 (staying blocks past one wave) beside d08, then d09
# built by the harness, its decode GPU tests and compute-sanitizer over it. Output to $OUT.
# (Its sanitizer workload, experiments/tools/decode_sanitize.py, became `python -m harness
# sanitize-workload --backends d09` afterwards: git show 8284ed0:experiments/tools/decode_sanitize.py.)
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/probe.log
nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a -I../../versions/common decode_probe.cu d07_entry.cu \
  d09_entry.cu -o /tmp/decode_probe 2>&1 | grep -v "^$" | tee -a $OUT/probe.log
timeout 240 /tmp/decode_probe 2>&1 | tee -a $OUT/probe.log
cd ../..
timeout 100 python -m harness build --backends d09 2>&1 | tail -2 | tee $OUT/tests.log
timeout 150 python -m pytest -q -m gpu tests/test_decode_gpu.py -k d09 -p no:cacheprovider 2>&1 | tail -3 | tee -a $OUT/tests.log
w="python experiments/tools/decode_sanitize.py --versions d09"
timeout 100 compute-sanitizer --tool memcheck --print-limit 20 $w 2>&1 | tail -5 | tee -a $OUT/tests.log
timeout 100 compute-sanitizer --tool racecheck --print-limit 20 $w --dtypes float32,bfloat16 --cases 3 2>&1 | tail -4 | tee -a $OUT/tests.log
