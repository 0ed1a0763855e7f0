#!/usr/bin/env bash
# Trial h23t_1 on a GPU: the variant checked against float64, then timed beside h23 and
# PyTorch's 16-bit kernels at every shape of the prefill grid in one run (`harness try`), in
# bfloat16; the log comes back as $OUT/h23t_1_grid.log. Run on the H100 on 2026-11-27
# (log results/nvidia-h100-80gb-hbm3/experiments/2026-11-27_21_h23t_1_grid.log).
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/h23t_1_grid.log
python -m harness try h23t=h23+experiments/h23/h23t_1_short_narrow_kernel.patch \
  --against h23,sdpa-cudnn,sdpa-flash,sdpa-efficient --shapes grid --dtype bfloat16 --rounds 2 \
  --log $OUT/h23t_1_grid.log 2>&1 | tail -80
