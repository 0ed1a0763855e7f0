#!/usr/bin/env bash
# read_floor.py with cuDNN's schedule read alone (read_tiles: a 128-thread block per head,
# 16 KB tiles of K and of V by cp.async in 2 or 3 stages; cudnn_profile.py's finding), bfloat16
# over the decode grid. Output to $OUT/read_floor_tiles.log.
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
log=$OUT/read_floor_tiles.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d09 2>&1 | tail -1 | tee -a $log
timeout 300 python experiments/d09/read_floor.py --dtype bfloat16 2>&1 | tee -a $log
echo "bfloat16: exit $? at $SECONDS s" | tee -a $log
