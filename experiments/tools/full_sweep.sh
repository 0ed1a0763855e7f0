#!/usr/bin/env bash
# One GPU's full sweep (`./run_all.sh`, every backend, every dtype, the prefill grid) at one
# commit, over as many device calls as it takes: each call runs the sweep for at most SECONDS,
# and the sweep resumes where the last call stopped (run_all.sh skips what this GPU, driver,
# torch and commit already have).
#   full_sweep.sh COMMIT [SECONDS]   (the commit's short hash, recorded in each row)
# BACKENDS=a,b,... passes --backends to run_all.sh (e.g. the grid's backends first).
# The rows are kept in /root/sweep on the device machine between calls, seeded from the copy's
# results/ the first time (a fresh machine: after the last call's rows were merged into the
# local results/ with `merge_results.py <files_at>/sweep_results.tgz`). Each call returns them
# all as $OUT/sweep_results.tgz, with the printed output in $OUT/sweep.log. SECONDS (default
# 520) leaves the call's 600 s room for the kill 40 s after the SIGTERM and the packing.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
limit=${2:-520}
scratch=/root/sweep
if [[ ! -d $scratch ]]; then
  mkdir -p $scratch && cp -r results/*/ $scratch/ && echo "seeded $scratch from the copy's results/"
fi
timeout -k 40 "$limit" ./run_all.sh ${BACKENDS:+--backends $BACKENDS} --results-dir $scratch --plots-dir /root/sweep_plots \
  > $OUT/sweep_raw.log 2>&1
echo "run_all.sh: exit $? after $SECONDS s" >> $OUT/sweep_raw.log
# A stage that outlives run_all.sh (killed 40 s after a SIGTERM it did not act on: twice a
# kernel benchmark stopped early, before its first rows, did not end) must not append while the
# rows are packed.
pkill -KILL -f "python3? -m harness" && echo "killed a harness process left running" >> $OUT/sweep_raw.log
tr '\r' '\n' < $OUT/sweep_raw.log | grep -v "run/s\|s/run\|it/s\|s/it\|backend/s\|s/backend\|^ *$" \
  > $OUT/sweep.log
rm $OUT/sweep_raw.log
(cd $scratch && tar czf $OUT/sweep_results.tgz ./*/*.csv)
grep "== \|^  [a-z].* s$\|exit\|resume\|FAILED\|rror" $OUT/sweep.log | tail -30
