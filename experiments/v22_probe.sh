#!/usr/bin/env bash
# Development probe of the float32 narrow kernel (versions 21-23; GPU, one device call): the
# GPU tests of VERSIONS, `harness try` (float32, every benchmark shape) of VERSIONS and
# TRY_VARIANTS beside v21 and sdpa-efficient, then ncu of each at B=1 T=512 (the narrow
# kernel): duration, tensor-pipe and issue utilisation, L1/shared-memory throughput and
# shared-memory wavefronts, the main stall reasons.
#   OUT=/some/dir [VERSIONS=v22,v23] experiments/v22_probe.sh "TRY_VARIANTS" [rounds]
# TRY_VARIANTS as for `harness try` (NAME=v22+experiments/v22o_1_....patch ...), may be "".
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
read -r -a TRY <<< "${1:-}"
ROUNDS=${2:-3}
VERSIONS=${VERSIONS:-v22}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1
timeout 240 python -m pytest -q --maxfail=5 -m gpu tests -k "${VERSIONS//,/ or }" \
  > "$OUT/tests.log" 2>&1 || echo "GPU tests exited with $? (see tests.log)"
tail -n 3 "$OUT/tests.log"
timeout 300 python -m harness try --dtype float32 --rounds "$ROUNDS" --against "v21,$VERSIONS" \
  --log "$OUT/try.log" "${TRY[@]}" > "$OUT/try_stdout.txt" 2>&1 || echo "try exited with $? (see try_stdout.txt)"
METRICS=gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
METRICS+=,sm__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
METRICS+=,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
for stall in wait long_scoreboard mio_throttle math_pipe_throttle barrier lg_throttle sleeping; do
  METRICS+=,smsp__average_warps_issue_stalled_${stall}_per_issue_active.ratio
done
for v in v21 ${VERSIONS//,/ } "${TRY[@]}"; do
  echo "== ncu $v"
  timeout 120 ncu --clock-control none -k regex:narrow_attention_kernel --launch-skip 2 --launch-count 1 \
    --metrics "$METRICS" python -m harness call "$v" --B 1 --T 512 --dtype float32 2>&1 | grep -E "^ +[a-z]|rror"
done > "$OUT/ncu.txt"
