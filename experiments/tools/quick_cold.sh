#!/usr/bin/env bash
# `./run_all.sh --quick` from cold on a fresh device machine (nothing built, no results): the
# wall time a newcomer waits, each stage's time in stages.csv. Results go to a temporary
# folder, so the committed CSVs are untouched; its stages.csv and the printed output come back
# in $OUT.   quick_cold.sh COMMIT   (the commit's short hash, recorded in each row)
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/quick.log
start=$SECONDS
./run_all.sh --quick --results-dir /tmp/quick --plots-dir /tmp/quick_plots >> $OUT/quick_raw.log 2>&1
status=$?
echo "run_all.sh --quick: exit $status after $((SECONDS - start)) s" | tee -a $OUT/quick.log
tr '\r' '\n' < $OUT/quick_raw.log | grep -v "run/s\|s/run\|it/s\|s/it\|backend/s\|s/backend\|^ *$" >> $OUT/quick.log
rm $OUT/quick_raw.log
cp /tmp/quick/*/stages.csv $OUT/quick_stages.csv
grep -i "stage\|took\|minutes\|exit" $OUT/quick.log | tail -20
