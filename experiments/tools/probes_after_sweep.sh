#!/usr/bin/env bash
# Three short measurements for a machine a sweep has just used (about 5 minutes), each under
# its own limit, logs under $OUT:
#   1. h24's 192-row items, item by item (experiments/h24/h24_device_call_3.sh: where an
#      item's ~3.6 µs start goes at B=32-64, T=128-512; issue 43);
#   2. the I/O floor of every grid shape and dtype (experiments/tools/io_floor.py, to
#      $OUT/io_floor.csv; issue 43's small-shape targets against it with grid_floor.py);
#   3. the decode caches read alone in cuDNN's schedule and the others
#      (experiments/d09/device_call_3.sh read_floor_tiles; on the H100 the tiles were never
#      read alone, and d10 gains nothing there; issue 42).
# Run from the checkout's root (not a frozen tree): the probes are this commit's, which the
# I/O floor's rows name (the device's copy of .git is older than its files).
#   probes_after_sweep.sh COMMIT
set -o pipefail
[[ $# -eq 1 && -n "$1" ]] || { echo "usage: probes_after_sweep.sh COMMIT (the checkout's commit)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
export TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1 STUDY_COMMIT="$1"
echo "== 1. h24t_1 item timeline"
timeout 240 bash experiments/h24/h24_device_call_3.sh || echo "h24_device_call_3.sh: exit $?"
echo "== 2. I/O floor, at $SECONDS s"
timeout 120 python experiments/tools/io_floor.py --out $OUT/io_floor.csv > $OUT/io_floor.log 2>&1
echo "io_floor.py: exit $? at $SECONDS s"; tail -3 $OUT/io_floor.log
echo "== 3. decode read floor, tiles, at $SECONDS s"
timeout $((560 - SECONDS)) bash experiments/d09/device_call_3.sh read_floor_tiles | tail -25
echo "done at $SECONDS s"
