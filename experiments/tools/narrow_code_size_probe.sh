#!/usr/bin/env bash
# Instruction fetch in the float32 narrow kernel at B=1 (GPU, one device call): `harness try`
# of the variants and backends given, beside v28, at every benchmark shape, then ncu of each one's narrow kernel at B=1, T in SHAPES: duration, active cycles,
# instructions and the warps' stall reasons per issued instruction, "no_instruction" (the
# instruction fetch) among them; once with ncu's default cache control (L1 and L2 flushed
# before the kernel, as the study's timing flushes the L2) and once with the caches kept.
#   OUT=/some/dir [SHAPES="128 512"] experiments/tools/narrow_code_size_probe.sh "v28 NAME=v28+PATCH ..." [rounds]
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
read -r -a ALL <<< "${1:?backends and variants}"
ROUNDS=${2:-3}
SHAPES=${SHAPES:-512}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1
TRY=() AGAINST=v28
for x in "${ALL[@]}"; do
  if [[ $x == *=* ]]; then TRY+=("$x"); elif [[ $x != v28 ]]; then AGAINST+=",$x"; fi
done
timeout 400 python -m harness try --rounds "$ROUNDS" --against "$AGAINST" --log "$OUT/try.log" \
  "${TRY[@]}" > "$OUT/try_stdout.txt" 2>&1 || echo "try exited with $? (see try_stdout.txt)"
tail -14 "$OUT/try.log"
M=gpu__time_duration.sum,sm__cycles_active.avg,smsp__inst_executed.sum
for r in no_instruction imc_miss long_scoreboard wait barrier branch_resolving short_scoreboard \
         math_pipe_throttle sleeping; do
  M+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
for v in "${ALL[@]}"; do
  for T in $SHAPES; do
    for cache in all none; do
      echo "== ncu $v B=1 T=$T, cache control $cache"
      timeout 100 ncu --clock-control none --cache-control "$cache" -k regex:narrow \
        --launch-skip 2 --launch-count 1 --metrics "$M" \
        python -m harness call "$v" --B 1 --T "$T" 2>&1 | grep -E "^ +[a-z]|rror"
    done
  done
done > "$OUT/ncu.txt"
cat "$OUT/ncu.txt"
