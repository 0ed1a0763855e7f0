#!/usr/bin/env bash
# d08's first device call: the block-shape probe against d07 (decode_probe.cu), d08's SASS
# loads, then d08 built by the harness and its decode GPU tests. Output to $OUT.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/probe.log
nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a -I../../versions/common decode_probe.cu d07_entry.cu \
  -o /tmp/decode_probe 2>&1 | grep -v "^$" | tee -a $OUT/probe.log
timeout 240 /tmp/decode_probe 2>&1 | tee -a $OUT/probe.log
cuobjdump -sass /tmp/decode_probe > /tmp/probe.sass 2>/dev/null
awk '/Function :/{f=$3} /LDG|LDS|SHFL|BAR|MUFU|FFMA/{split($2,a,"."); n[f" "a[1]]++} END{for(k in n) print n[k], k}' /tmp/probe.sass \
  | sort -k2 | grep -i "decode_kernel" > $OUT/sass_counts.txt
grep -m3 "LDG" /tmp/probe.sass >> $OUT/sass_counts.txt
cd ../..
timeout 120 python -m harness build --backends d08 2>&1 | tail -3 | tee $OUT/tests.log
timeout 150 python -m pytest -q -m gpu tests/test_decode_gpu.py -k d08 -p no:cacheprovider -x 2>&1 | tail -15 | tee -a $OUT/tests.log
