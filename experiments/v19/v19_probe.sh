#!/usr/bin/env bash
# Development probe of the float32 Hopper versions (GPU, one device call): the GPU tests of
# VERSIONS, then `harness try` (float32, every benchmark shape) of TRY_VARIANTS, if any,
# beside BASE, VERSIONS and sdpa-efficient, then ncu
# of BASE, VERSIONS and the variants: duration, tensor-pipe, MUFU (XU) and issue utilisation,
# L1/shared-memory throughput and wavefronts, DRAM and L2, the main stall reasons.
#   OUT=/some/dir [VERSIONS=v19,v20] [BASE=v18] [KERNEL=causal_attention_kernel] \
#     [SHAPE="--B 8 --T 4096"] experiments/v19/v19_probe.sh "TRY_VARIANTS" [rounds]
# TRY_VARIANTS as for `harness try` (NAME=v19+experiments/v19_1_....patch ...), may be "".
# Versions 19-20 were probed with the defaults; the narrow kernel of versions 21-25 with
#   BASE=v21 KERNEL=narrow_attention_kernel SHAPE="--B 1 --T 512".
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
read -r -a TRY <<< "${1:-}"
ROUNDS=${2:-3}
VERSIONS=${VERSIONS:-v19}
BASE=${BASE:-v18}
KERNEL=${KERNEL:-causal_attention_kernel}
read -r -a SHAPE_ARGS <<< "${SHAPE:---B 8 --T 4096}"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1
timeout 420 python -m pytest -q --maxfail=5 -m gpu tests -k "${VERSIONS//,/ or }" \
  > "$OUT/tests.log" 2>&1 || echo "GPU tests exited with $? (see tests.log)"
tail -n 3 "$OUT/tests.log"
timeout 300 python -m harness try --dtype float32 --rounds "$ROUNDS" --against "$BASE,$VERSIONS" \
  --log "$OUT/try.log" "${TRY[@]}" > "$OUT/try_stdout.txt" 2>&1 || echo "try exited with $? (see try_stdout.txt)"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
METRICS+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active
METRICS+=,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
METRICS+=,l1tex__throughput.avg.pct_of_peak_sustained_active
METRICS+=,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
METRICS+=,lts__throughput.avg.pct_of_peak_sustained_elapsed
for stall in wait long_scoreboard not_selected math_pipe_throttle mio_throttle lg_throttle barrier membar sleeping; do
  METRICS+=,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
done
for v in "$BASE" ${VERSIONS//,/ } "${TRY[@]}"; do
  echo "== ncu $v"
  timeout 120 ncu --clock-control none -k "regex:$KERNEL" --launch-skip 2 --launch-count 1 \
    --metrics "$METRICS" python -m harness call "$v" --dtype float32 "${SHAPE_ARGS[@]}" 2>&1 |
    grep -E "^ +[a-z]|rror"
done > "$OUT/ncu.txt"
