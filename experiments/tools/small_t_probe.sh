#!/usr/bin/env bash
# Where float32 time goes at B=1, small T (GPU, one device call): `harness try` of TRY_VARIANTS
# beside VERSIONS and sdpa-efficient at every benchmark shape, then ncu of each backend's
# attention kernel and merge kernel apart at B=1, T in SHAPES: each kernel's duration (ncu
# serialises kernels and flushes caches between them, so a dependent launch shows no
# overlap here), its active SM cycles and its grid.
#   OUT=/some/dir [VERSIONS=v18,v20] [SHAPES="128 256 512"] experiments/tools/small_t_probe.sh "TRY_VARIANTS" [rounds]
# TRY_VARIANTS as for `harness try` (NAME=v20+experiments/v20_2_....patch ...), may be "".
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
read -r -a TRY <<< "${1:-}"
ROUNDS=${2:-3}
VERSIONS=${VERSIONS:-v18,v20}
SHAPES=${SHAPES:-128 256 512}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1
timeout 300 python -m harness try --rounds "$ROUNDS" --against "$VERSIONS" --log "$OUT/try.log" \
  "${TRY[@]}" > "$OUT/try_stdout.txt" 2>&1 || echo "try exited with $? (see try_stdout.txt)"
METRICS=gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,launch__grid_size
METRICS+=,launch__block_size,smsp__inst_executed.sum
for v in ${VERSIONS//,/ } "${TRY[@]}"; do
  for T in $SHAPES; do
    # The first call builds and warms up; the next two are profiled (attention, merge).
    echo "== ncu $v B=1 T=$T"
    timeout 120 ncu --clock-control none -k regex:"causal_attention_kernel|merge_splits" \
      --launch-skip 2 --launch-count 4 --metrics "$METRICS" \
      python -m harness call "$v" --B 1 --T "$T" 2>&1 | grep -E "^ +[a-z]|^  [a-z_]+.*\(|rror"
  done
done > "$OUT/ncu.txt"
