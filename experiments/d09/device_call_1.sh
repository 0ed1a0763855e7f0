#!/usr/bin/env bash
# The first device call for d09's trials: trial d09c_1 (staying clusters) made from its
# patch, then experiments/d08/decode_probe.cu with d07, d08's block shapes, d09, d09c, and
# the two readings alone (d08's grid; the flat reading, as a copy reads). The probe checks
# each kernel against float64 first (B=3 and B=33, NaN past each length) and prints
# "SOME CHECKS FAILED" and exits 1 if one misses. Output to $OUT/d09_trials_probe.log.
set -o pipefail
cd "$(dirname "$0")/../.."
log=$OUT/d09_trials_probe.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
patch -s -o /tmp/d09c_attention.cu versions/d09_blocks_stay/attention.cu \
  experiments/d09/d09c_1_staying_clusters.patch 2>&1 | tee -a $log
cd experiments/d08
nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a -Xptxas -v -I../../versions/common -I/tmp decode_probe.cu \
  d07_entry.cu d09_entry.cu d09c_entry.cu -o /tmp/decode_probe 2>&1 | grep -A1 "staying_kernel" \
  | grep "registers\|spill" | tee -a $log
timeout 400 /tmp/decode_probe 2>&1 | tee -a $log
echo "probe: exit $? after $SECONDS s" | tee -a $log
