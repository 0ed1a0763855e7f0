#!/usr/bin/env bash
# Device call 4: d08's GPU tests and timing; the KV-cache generation on the GPU (tests, the CLI, one
# dtype of the end-to-end kv-cache plans) to check it and to time it.
set -o pipefail
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
start=$SECONDS
python -m harness build --backends d07,d08,v29,h23 2>&1 | tail -1
echo "built at $((SECONDS-start)) s"
timeout 60 python -m pytest -q -m gpu tests/test_decode_gpu.py -p no:cacheprovider -k d08 2>&1 | tail -3
echo "d08 tests at $((SECONDS-start)) s"
timeout 60 python -m harness bench-decode --backends naive,sdpa-flash,sdpa-cudnn,d02,d07,d08 --rounds 1 --skip-gate --results-dir $OUT/res > $OUT/bench.log 2>&1
python experiments/tools/summarize_decode.py $OUT/res/*/decode.csv > $OUT/summary.txt; head -50 $OUT/summary.txt | cut -c1-170
echo "bench at $((SECONDS-start)) s"
timeout 150 python -m pytest -q -m gpu tests/test_capture_gpu.py -p no:cacheprovider -k kv_cache 2>&1 | tail -6
echo "kv capture tests at $((SECONDS-start)) s"
timeout 60 python -m gpt2 --mode kv-cache --batch 8 --backend study --dtype bfloat16 --tokens 136 2>&1 | tail -12
echo "cli at $((SECONDS-start)) s"
timeout $((570-SECONDS+start)) python -m harness bench-e2e --modes kv-cache --backends naive,sdpa-cudnn,study,transformers-generate --dtypes bfloat16 --skip-gate --results-dir $OUT/e2e > $OUT/e2e.log 2>&1
tr '\r' '\n' < $OUT/e2e.log | grep -v "it/s\|s/it\|backend/s\|s/backend" | tail -40
echo "e2e at $((SECONDS-start)) s"
