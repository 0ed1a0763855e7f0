#!/usr/bin/env bash
# The session's sweep on one GPU: decode versions' GPU tests, the decode gate and benchmark of every
# decode backend, the KV-cache end-to-end plans in float32 and bfloat16; stage times recorded;
# results and the printed output copied to $OUT.
#   decode_kv_sweep.sh COMMIT [SECONDS]   (the commit's short hash, recorded in each row)
# PARTS (default tests,decode,e2e) picks the parts, so that one device call of at most 10 minutes
# can take some; SANITIZE=d08,... also runs compute-sanitizer's memcheck (every dtype) and racecheck
# (float32 and bfloat16) over those versions' workload (python -m harness sanitize-workload: the
# decode gate's cases).
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
limit=${2:-560}
D=${DECODE_VERSIONS:-d01,d02,d03,d04,d05,d06,d07,d08,d09}  # DECODE_VERSIONS picks some
B=naive,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn,flex-attention,$D
E=naive,sdpa-efficient,sdpa-cudnn,study,transformers-generate,sdpa-flash,sdpa-math,flex-attention
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
parts=${PARTS:-tests,decode,e2e}
has() { [[ ",$parts," == *",$1,"* ]]; }
stage build 120 python -m harness build --backends $D,v29,h23
has tests && stage "decode GPU tests" 150 python -m pytest -q -m gpu tests/test_decode_gpu.py -p no:cacheprovider
if [[ -n "${SANITIZE:-}" ]]; then
  w="python -m harness sanitize-workload --backends $SANITIZE"
  for tool in "memcheck:" "racecheck:--dtypes float32,bfloat16"; do
    echo "\$ compute-sanitizer --tool ${tool%%:*} --print-limit 20 $w ${tool#*:}" >> $OUT/sanitizers.log
    timeout 200 compute-sanitizer --tool "${tool%%:*}" --print-limit 20 $w ${tool#*:} >> $OUT/sanitizers.log 2>&1
  done
fi
has decode && stage "decode benchmark" 240 python -m harness bench-decode --backends $B
has e2e && stage "end-to-end (kv-cache; float32, bfloat16)" $((limit-SECONDS+start)) python -m harness bench-e2e --modes kv-cache --backends $E --dtypes bfloat16,float32 --skip-gate
recorded=$B; has e2e && recorded="$B,study,transformers-generate"
python -m harness record-stages --run "$run_started" --mode full --backends "$recorded" --dtypes all "${stages[@]}" >> $log 2>&1
tr '\r' '\n' < $log | grep -v "run/s\|s/run\|it/s\|s/it\|backend/s\|s/backend\|^ *$" > $OUT/sweep_clean.log; rm $log
for f in $(find results -name "*.csv" -newer "$marker"); do  # this run's files only
  cp "$f" "$OUT/$(basename "$(dirname "$f")")__$(basename "$f")"
done
grep "== \|   .*: .* s, exit\|FAILED\|passed\|failed\|HBM bandwidth\|decode gate\|WARNING" $OUT/sweep_clean.log | tail -40
