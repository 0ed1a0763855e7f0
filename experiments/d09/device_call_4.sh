#!/usr/bin/env bash
# What cuDNN's decode kernel is, beside d09's, at batch 32 L=16384 bfloat16 (where cuDNN reads
# the caches faster than any reading of read_floor.py): Nsight Compute's launch, occupancy,
# throughput and memory sections, then both kernels' SASS with their memory instructions counted
# together (sass_head.txt, returned, has them apart).
# Output to $OUT/cudnn_profile.log (and the SASS in $OUT/sass_*.txt).
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
log=$OUT/cudnn_profile.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d09 2>&1 | tail -1 | tee -a $log
ncu --clock-control none --profile-from-start off --section LaunchStats --section Occupancy \
  --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_ldgsts.sum \
  python experiments/d09/cudnn_profile.py 2>&1 | grep -v "^==PROF==" | tee -a $log
ncu --clock-control none --profile-from-start off --section SourceCounters --page source --print-source sass \
  python experiments/d09/cudnn_profile.py > $OUT/sass_all.txt 2>&1
echo "== SASS: memory and synchronisation instructions of both kernels together (static counts)" | tee -a $log
awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^(LDG|UTMALDG|UBLKCP|LDGSTS|LDS|SYNCS|BAR|UTMAPF|LDGDEPBAR|CCTL|STG|RED|ATOM)/) {split($i, op, "."); n[op[1]]++; full[$i]++}}
     END {for (o in n) print "  " o, n[o]; for (f in full) print "    " f, full[f]}' $OUT/sass_all.txt | sort | tee -a $log
head -c 3000000 $OUT/sass_all.txt > $OUT/sass_head.txt && rm $OUT/sass_all.txt
echo "done at $SECONDS s" | tee -a $log
