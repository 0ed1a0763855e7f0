#!/usr/bin/env bash
# The floor under the decode track (read_floor.py): the caches read alone, by 16-byte loads
# and by bulk copies, beside d09 and PyTorch's kernels in one run, bfloat16 over the whole
# decode grid and float32 at batch 1 and 8 (where float32's target is in question). Output
# to $OUT/read_floor.log.
set -o pipefail
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
log=$OUT/read_floor.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends d09 2>&1 | tail -2 | tee -a $log
timeout 300 python experiments/d09/read_floor.py --dtype bfloat16 2>&1 | tee -a $log
echo "bfloat16: exit $? at $SECONDS s" | tee -a $log
timeout 150 python experiments/d09/read_floor.py --dtype float32 --batches 1,8 2>&1 | grep -v "^check" | tee -a $log
echo "float32: exit $? at $SECONDS s" | tee -a $log
