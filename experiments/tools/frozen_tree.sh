#!/usr/bin/env bash
# A copy of one commit's tree inside the checkout, so that a sweep begun at that commit can
# resume after the checkout has moved on (a device call sends the checkout as it is now, and
# every row names the commit it was measured at: the code must be that commit's).
#   experiments/tools/frozen_tree.sh COMMIT [DIR]      (run here, not on the device)
# DIR (default frozen) gets `git archive COMMIT` of everything the sweep runs (the code, the
# tests, experiments/tools), not its results/, plots/ or logs: DIR/results is a link to the
# checkout's results/, so full_sweep.sh seeds a fresh machine with the rows merged so far
# (experiments/tools/merge_results.py). DIR is added to .git/info/exclude: it is never
# committed, and a device call takes it only when named in `carry`. Then, on the device:
#   run(command="cd DIR && bash experiments/tools/full_sweep.sh COMMIT", carry=["DIR"])
# and merge $OUT's sweep_results.tgz here as usual. Make DIR right before the calls and remove
# it after them (rm -rf DIR): a copy left in the checkout is found by grep -r and edited by
# mistake, and then the rows would not be the commit's.
set -euo pipefail
usage="usage: experiments/tools/frozen_tree.sh COMMIT [DIR]"
[[ $# -ge 1 && $# -le 2 && -n "$1" ]] || { echo "$usage" >&2; exit 2; }
commit=$1 dir=${2:-frozen}
cd "$(git rev-parse --show-toplevel)"
full=$(git rev-parse --verify --quiet "$commit^{commit}") || { echo "frozen_tree: no commit '$commit' here" >&2; exit 2; }
case $dir in
  /* | *..* | "" | . | results* | plots* | versions* | harness* | backends* | gpt2* | tests* | experiments*)
    echo "frozen_tree: DIR must be a new folder name inside the checkout, not '$dir'" >&2; exit 2 ;;
esac
[[ ! -e $dir ]] || { echo "frozen_tree: $dir exists; remove it first (rm -rf $dir)" >&2; exit 2; }
mkdir "$dir"
git archive "$full" -- . ':!results' ':!plots' ':!experiments' ':!README.md' | tar -x -C "$dir"
git archive "$full" -- experiments/tools | tar -x -C "$dir"
ln -s ../results "$dir/results"
grep -qxF "/$dir/" .git/info/exclude 2>/dev/null || echo "/$dir/" >> .git/info/exclude
echo "$dir: the tree of ${full:0:12} ($(du -sh --apparent-size "$dir" | cut -f1)), results/ linked to the checkout's"
echo "device: cd $dir && bash experiments/tools/full_sweep.sh ${full:0:12}   (carry: [\"$dir\"])"
