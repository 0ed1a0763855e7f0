#!/usr/bin/env bash
# h24's first device call: build, the gate (rows into a scratch results folder, returned as
# $OUT/gate_results.tgz for merge_results.py), the GPU tests that run h24 and the new grid-shape
# tests, compute-sanitizer memcheck and racecheck, then the trials h24u_1, h24v_1 and h24x_1
# beside h24, h23 and PyTorch's 16-bit kernels over the prefill grid (`harness try`, bfloat16).
#   h24_device_call_1.sh COMMIT   (the commit this tree is: the gate's rows name it)
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
log=$OUT/h24_gate_tests_sanitizers.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $log
python -m harness build --backends h24,v29 2>&1 | tail -3 | tee -a $log
echo "== gate, at $SECONDS s" | tee -a $log
python -m harness check --backends h24 --results-dir /root/gate 2>&1 | tr '\r' '\n' | grep -v "it/s\|s/it" | tail -12 | tee -a $log
(cd /root/gate && tar czf $OUT/gate_results.tgz ./*/*.csv)
echo "== GPU tests, at $SECONDS s" | tee -a $log
timeout 200 python -m pytest -q -m gpu tests/test_versions_gpu.py -k "h24 or grid_shapes" -p no:cacheprovider \
  --maxfail=20 2>&1 | tail -15 | tee -a $log
echo "== sanitizers, at $SECONDS s" | tee -a $log
timeout 280 tools/sanitize.sh h24 /root/sanitizer 2>&1 | tee -a $log
echo "== trials, at $SECONDS s" | tee -a $log
p=experiments/h24
timeout $((585 - SECONDS)) python -m harness try h24u=h24+$p/h24u_1_short_up_to_four_tiles.patch \
  h24v=h24+$p/h24v_1_short_six_waves.patch h24x=h24+$p/h24x_1_short_four_tiles_six_waves.patch \
  --against h24,h23,sdpa-cudnn,sdpa-flash,sdpa-efficient --shapes grid --dtype bfloat16 --rounds 2 \
  --log $OUT/h24_trials_grid.log 2>&1 | tail -60
echo "done at $SECONDS s" | tee -a $log
