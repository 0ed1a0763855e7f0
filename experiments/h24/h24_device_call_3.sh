#!/usr/bin/env bash
# Where a persistent 192-row block's time goes, item by item, where h24 loses to cuDNN
# (batched prompts of 128-512 tokens): h24 with experiments/h24/h24t_1_item_timeline.patch,
# called at those shapes and at B=8 T=4096 (long items, for comparison), each call's last
# launch summarised by experiments/tools/item_timeline.py. About 90 s (one variant build).
# The timelines and the summaries go to $OUT.
#   h24_device_call_3.sh
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
log=$OUT/h24t_1_item_timeline.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
variant=h24t_1=h24+experiments/h24/h24t_1_item_timeline.patch
for shape in "64 256" "32 256" "64 128" "16 512" "8 4096"; do
  set -- $shape
  out=$OUT/h24t_1_B$1_T$2.txt
  echo "== B=$1 T=$2, at $SECONDS s" | tee -a $log
  timeout 200 python -m harness call --dtype bfloat16 --B $1 --T $2 --repeat 3 $variant > $out 2>&1 \
    || { echo "call failed:"; tail -5 $out; } | tee -a $log
  python experiments/tools/item_timeline.py $out 2>&1 | tee -a $log
done
echo "done at $SECONDS s" | tee -a $log
