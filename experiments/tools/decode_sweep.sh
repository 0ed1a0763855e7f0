#!/usr/bin/env bash
# The decode stage of the session's sweep alone: build, decode gate and benchmark; stage times
# recorded; the result files and the printed output copied to $OUT.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
D=d01,d02,d03,d04,d05,d06,d07
B=naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,flex-attention,$D
run_started=$(date -u +%Y-%m-%dT%H:%M:%SZ) start=$SECONDS stages=()
marker=$(mktemp); sleep 1
log=$OUT/sweep.log
stage() {  # stage NAME SECONDS_LIMIT COMMAND...
  local name=$1 lim=$2 t0=$SECONDS status=0; shift 2
  echo "== $name (limit $lim s)" | tee -a $log
  timeout "$lim" "$@" >> $log 2>&1 || status=$?
  stages+=("$name:$((SECONDS-t0)):$status"); echo "   $name: $((SECONDS-t0)) s, exit $status (at $((SECONDS-start)) s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
stage build 90 python -m harness build --backends $D
stage "decode benchmark" ${2:-170} python -m harness bench-decode --backends $B
python -m harness record-stages --run "$run_started" --mode full --backends "$B" --dtypes all "${stages[@]}" >> $log 2>&1
tr '\r' '\n' < $log | grep -v "run/s\|s/run\|it/s\|s/it\|backend/s\|s/backend\|^ *$" > $OUT/sweep_clean.log; rm $log
for f in $(find results -name "*.csv" -newer "$marker"); do
  cp "$f" "$OUT/$(basename "$(dirname "$f")")__$(basename "$f")"
done
grep "== \|   .*: .* s, exit\|HBM bandwidth\|decode gate\|Traceback\|Error" $OUT/sweep_clean.log | tail -20
