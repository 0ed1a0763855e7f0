#!/usr/bin/env bash
# Development probe for the step after h04 (GPU, one device call). Variants are written as
# for `harness try` (NAME=h04+experiments/h04/h04x_1_....patch+...):
#   OUT=/some/dir experiments/h04/h04_probe.sh "TRY_VARIANTS" "NCU_VARIANTS" [dtype] [rounds]
# 1. harness try: each variant of TRY_VARIANTS checked against float64 of the same 16-bit
#    inputs (the study's bound) and timed at the headline shapes beside h04 and cuDNN;
# 2. ncu at B=8 T=4096: duration, tensor-pipe, MUFU (XU) and issue utilisation, DRAM bytes and
#    throughput, L2 hit rate and throughput, and the main stall reasons of h04 and each of
#    NCU_VARIANTS (these may be timing-only variants that fail the check, e.g. h04z: no
#    softmax).
# On a device machine whose copy of .git is stale, set STUDY_COMMIT=<commit> so that the try
# log names the tree that ran (backends/environment.py reads it).
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
read -r -a TRY <<< "${1:-}"
read -r -a NCU <<< "${2:-}"
DTYPE=${3:-bfloat16}
ROUNDS=${4:-3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
if ((${#TRY[@]})); then
  python -m harness try --dtype "$DTYPE" --shapes headline --rounds "$ROUNDS" --against h04 \
    --log "$OUT/try_$DTYPE.log" "${TRY[@]}" > "$OUT/try_${DTYPE}_stdout.txt" 2>&1 \
    || echo "try exited with $? (see try_${DTYPE}_stdout.txt)"
fi
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
METRICS+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active
METRICS+=,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
METRICS+=,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
METRICS+=,lts__throughput.avg.pct_of_peak_sustained_elapsed
for stall in wait long_scoreboard not_selected math_pipe_throttle mio_throttle barrier dispatch_stall; do
  METRICS+=,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
done
for v in h04 "${NCU[@]}"; do
  echo "== ncu $v"
  ncu --clock-control none -k regex:causal_attention_kernel --launch-skip 2 --launch-count 1 \
    --metrics "$METRICS" python -m harness call --dtype "$DTYPE" "$v" 2>&1 | grep -E "^ +[a-z]"
done > "$OUT/ncu_$DTYPE.txt"
