#!/usr/bin/env bash
# d08's third device call (after the sweep): the probe with a plan that fills the last wave
# where the heads take several ("fill"), beside d08's plan, at 256 x 2 and 128 x 4. Output to $OUT.
set -o pipefail
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/probe.log
nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a -I../../versions/common decode_probe.cu d07_entry.cu \
  -o /tmp/decode_probe 2>&1 | grep -v "^$" | tee -a $OUT/probe.log
timeout 240 /tmp/decode_probe 2>&1 | tee -a $OUT/probe.log
