#!/usr/bin/env bash
# read_floor.py again with the copy's order in chunks of whole rows (the unit a kernel that
# reads in memory order would take), bfloat16 over the decode grid. Output to
# $OUT/read_floor_chunks.log.
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
log=$OUT/read_floor_chunks.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d09 2>&1 | tail -2 | tee -a $log
timeout 300 python experiments/d09/read_floor.py --dtype bfloat16 2>&1 | tee -a $log
echo "bfloat16: exit $? at $SECONDS s" | tee -a $log
