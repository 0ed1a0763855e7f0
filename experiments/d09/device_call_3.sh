#!/usr/bin/env bash
# read_floor.py over the decode grid in bfloat16 alone (device_call_2.sh without its float32
# part), as the readings were added: the copy's order in chunks of whole rows (log
# 2026-11-28_2 on the H200, log name read_floor_chunks) and cuDNN's schedule read alone
# (2026-11-28_4, read_floor_tiles). Output to $OUT/LOG_NAME.log.
#   device_call_3.sh [LOG_NAME]   (default: read_floor_bfloat16)
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
log=$OUT/${1:-read_floor_bfloat16}.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d09 2>&1 | tail -1 | tee -a $log
timeout 300 python experiments/d09/read_floor.py --dtype bfloat16 2>&1 | tee -a $log
echo "bfloat16: exit $? at $SECONDS s" | tee -a $log
