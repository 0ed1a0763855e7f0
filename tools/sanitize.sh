#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over every version (or the ones given as
# "v01,v05") at small awkward shapes, a decode version on the decode gate's cases. Exits
# non-zero unless both report 0 errors.
# Usage: tools/sanitize.sh [v01,v02,...] [LOG_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
backends="${1:-all}"
log_dir="${2:-build/sanitizer}"
mkdir -p "$log_dir"
command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer is not on PATH" >&2; exit 2; }

python -m harness build --backends "$backends"
status=0
for tool in memcheck racecheck; do
  log="$log_dir/$tool.log"
  echo "== compute-sanitizer --tool $tool (log: $log)"
  if compute-sanitizer --tool "$tool" --error-exitcode 9 \
      python -m harness sanitize-workload --backends "$backends" >"$log" 2>&1; then
    :
  else
    status=1
  fi
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|WRONG" "$log" || true
  tail -n 3 "$log"
done
exit $status
