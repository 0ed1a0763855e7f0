#!/usr/bin/env bash
# Formats the kernels (versions/*/attention.cu), the shared glue (versions/common/*) and the
# standalone CUDA programs of experiments/ (experiments/tools/*.cu)
# with clang-format 18 and the repository's .clang-format.
#
#   tools/format.sh                 format every such file in place
#   tools/format.sh --check         change nothing; list the files that would change and
#                                   exit 1 if there are any
#   tools/format.sh [--check] FILE...   only these files
#
# clang-format comes from $CLANG_FORMAT or PATH and must be version 18 (other versions
# format differently): pip install clang-format==18.1.8
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
style="file:$root/.clang-format"

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
if [[ "${1:-}" == -* ]]; then
  echo "usage: tools/format.sh [--check] [FILE...]" >&2
  exit 2
fi

clang_format="${CLANG_FORMAT:-$(command -v clang-format || true)}"
if [[ -z "$clang_format" ]]; then
  echo "tools/format.sh: clang-format not found; install version 18 with" >&2
  echo "  pip install clang-format==18.1.8" >&2
  echo "(or set CLANG_FORMAT to a clang-format 18 binary)" >&2
  exit 2
fi
version="$("$clang_format" --version | head -n 1)"
if [[ ! "$version" =~ clang-format\ version\ 18\. ]]; then
  echo "tools/format.sh: need clang-format 18, $clang_format is: $version" >&2
  echo "  pip install clang-format==18.1.8" >&2
  exit 2
fi

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  shopt -s nullglob
  files=("$root"/versions/*/attention.cu "$root"/versions/common/*.h "$root"/versions/common/*.cpp
         "$root"/versions/common/*.cu "$root"/experiments/tools/*.cu)
fi

if [[ $check -eq 0 ]]; then
  "$clang_format" --style="$style" -i "${files[@]}"
  exit 0
fi

unformatted=0
for f in "${files[@]}"; do
  if ! "$clang_format" --style="$style" "$f" | cmp -s - "$f"; then
    echo "${f#"$root"/}"
    unformatted=$((unformatted + 1))
  fi
done
if [[ $unformatted -gt 0 ]]; then
  echo "tools/format.sh --check: $unformatted file(s) not formatted; run tools/format.sh" >&2
  exit 1
fi
