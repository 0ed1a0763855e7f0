#!/usr/bin/env bash
# The whole study on this machine's GPU:
#   build -> correctness gates -> kernel benchmark -> decode benchmark -> end-to-end sweep -> plots -> report
# Results go to <results-dir>/<gpu>/ (appended row by row; a rerun resumes where it
# stopped), plots to <plots-dir>/<gpu>/. The README tables and the GPUs' pages
# (results/<gpu>/README.md) are rewritten only from the committed results/ folder; any other
# --results-dir gets <results-dir>/report.md.
set -euo pipefail
cd "$(dirname "$0")"

usage() {
  cat <<'USAGE'
Usage: ./run_all.sh [options]

  --quick             each track's first and last versions beside PyTorch's kernels (not
                      flex-attention), at a few shapes and token counts; each run's stage
                      times go to stages.csv, and each GPU's page shows them (mode quick)
  --backends LIST     only these backends, e.g. naive,sdpa-efficient,v10,v11 (default: all;
                      with --quick, all but those the registry leaves out of a quick sweep)
  --dtypes LIST       only these dtypes, e.g. float32 or bfloat16,float16 (default: all three;
                      each backend is measured in each of them that it takes)
  --results-dir DIR   where the CSVs go (default: results/); e.g. a temporary folder for a trial
  --plots-dir DIR     where the figures go (default: plots/)
  --model-dir DIR     real GPT-2 weights from a local snapshot (config.json + model.safetensors);
                      default: the Hugging Face cache if it has gpt2, else seeded random weights
  --plots-only        redraw plots and tables from existing CSVs (no GPU needed)
  --fresh             measure again what this setup (GPU, driver, torch, commit) already has
  -h, --help          this help

Environment: PYTHON (default python3) is the interpreter used. Nothing is installed
unless a dependency is missing and PYTHON runs inside a virtual environment.
USAGE
}

original_args=("$@")  # for the line that says how to resume
quick=() backends="" dtypes=all plots_only=0 fresh=() results=() plots=() model=()
# An option's value: the next argument, or what follows '=' (--dtypes=float32); an empty one
# (or blanks) is refused (an empty --backends is not 'all', an empty folder not the current one).
# An option with a value may be given once: a second would silently replace the first.
given=" "
need_value() {
  [[ $# -ge 2 && -n "${2//[[:space:]]/}" ]] || { echo "run_all.sh: $1 needs a value" >&2; exit 2; }
  [[ "$given" != *" $1 "* ]] || { echo "run_all.sh: $1 is given twice: give it once" >&2; exit 2; }
  given+="$1 "
}
value_after_equals() { need_value "${1%%=*}" "${1#*=}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --backends) need_value "$@"; backends="$2"; shift ;;
    --backends=*) value_after_equals "$1"; backends="${1#*=}" ;;
    --dtypes) need_value "$@"; dtypes="$2"; shift ;;
    --dtypes=*) value_after_equals "$1"; dtypes="${1#*=}" ;;
    --results-dir) need_value "$@"; results=(--results-dir "$2"); shift ;;
    --results-dir=*) value_after_equals "$1"; results=(--results-dir "${1#*=}") ;;
    --plots-dir) need_value "$@"; plots=(--plots-dir "$2"); shift ;;
    --plots-dir=*) value_after_equals "$1"; plots=(--plots-dir "${1#*=}") ;;
    --model-dir) need_value "$@"; model=(--model-dir "$2"); shift ;;
    --model-dir=*) value_after_equals "$1"; model=(--model-dir "${1#*=}") ;;
    --plots-only) plots_only=1 ;;
    --fresh) fresh=(--fresh) ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all.sh: unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null; then
  echo "run_all.sh: no Python interpreter '$PYTHON' (set PYTHON=...)" >&2
  exit 2
fi

# 1. A GPU first, before anything is installed (unless only the plots are redrawn), and a word
# on the commit the rows will name. Every row names the commit it was measured at
# (backends/environment.py: git's HEAD, with '-dirty' when the tree differs from it,
# STUDY_COMMIT if set); a copy of the tree whose .git is older than the files (a GPU machine
# that was sent the files, not the history) would name the wrong commit: say so before anything
# is measured. One interpreter asks both (each start imports torch: seconds on a small
# machine); it prints the warning (or an empty line), then why there is no GPU (empty when
# torch sees one; "no torch" when torch does not import).
if [[ $plots_only -eq 0 ]]; then
  preflight=$("$PYTHON" - 2>/dev/null <<'PY' || printf '\nno torch'
try:
    import torch
except ImportError:
    print()
    print("no torch")
    raise SystemExit(0)
try:
    from backends.environment import git_commit, stale_commit_warning
    print(stale_commit_warning(git_commit()) or "")
except Exception:  # no word on the commit rather than no sweep
    print()
if not torch.cuda.is_available():
    print(f"no CUDA device is available to torch ({torch.__version__}, CUDA {torch.version.cuda})")
PY
)
  warning=${preflight%%$'\n'*}
  why=""
  [[ "$preflight" == *$'\n'* ]] && why=${preflight#*$'\n'}
  if [[ -n "$warning" ]]; then
    echo "run_all.sh: $warning" >&2
  fi
  if [[ "$why" == "no torch" ]]; then
    nvidia-smi -L 2>/dev/null | grep -q "GPU" && why="" || why="no CUDA device is available (nvidia-smi lists none)"
  fi
  if [[ -n "$why" ]]; then
    echo "run_all.sh: $why. The sweep needs a GPU; use --plots-only to redraw plots and tables" \
         "from existing CSVs." >&2
    exit 2
  fi
fi

# 2. Dependencies: use what imports; install only into a virtual environment.
missing=$("$PYTHON" - torch matplotlib tiktoken safetensors tqdm <<'PY'
import importlib.util, sys
print(" ".join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))
PY
)
# torch's extension builder runs the ninja binary from PATH (a system package or pip's ninja).
bin_dir=$("$PYTHON" -c "import os, sys; print(os.path.dirname(sys.executable))")
if [[ $plots_only -eq 0 ]] && ! command -v ninja >/dev/null && [[ ! -x "$bin_dir/ninja" ]]; then
  missing="${missing:+$missing }ninja"
fi
if [[ -n "$missing" ]]; then
  if "$PYTHON" -c "import sys; sys.exit(0 if sys.prefix != sys.base_prefix else 1)"; then
    echo "run_all.sh: installing the project's dependencies into $("$PYTHON" -c 'import sys; print(sys.prefix)')" \
         "(missing: $missing)"
    "$PYTHON" -m pip install -e .
  else
    cat >&2 <<EOF
run_all.sh: $PYTHON lacks: $missing
It is not a virtual environment, so nothing is installed into it. Either install them
yourself, or make a virtual environment and rerun:
  python3 -m venv .venv && . .venv/bin/activate && pip install -e . && ./run_all.sh
(on a machine without a GPU, install torch's CPU build first:
  pip install torch --index-url https://download.pytorch.org/whl/cpu)
EOF
    exit 2
  fi
fi
# The interpreter's own bin folder (a venv's ninja) on PATH for the builds.
export PATH="$bin_dir:$PATH"
export PYTHONUNBUFFERED=1

# Unknown backend or dtype names, a GPU's own folder as --results-dir, a file where a folder
# must be (for --plots-only, a results folder that cannot be read) and a model folder that is
# not GPT-2's are refused before anything runs (--plots-only uses no names and no model, but
# one it would ignore is still a mistake). Exit status 2, or 130 on Ctrl-C. Asked of Python
# (which imports torch, seconds) only where there is something to check: names given, a results
# folder that holds CSVs itself, a file where a folder is or will be made, a results folder
# --plots-only cannot read, a model folder.
file_in_the_way() {  # the nearest of $1 and its parents that exists is not a folder
  local path=$1
  while [[ ! -e $path && $path != "/" && $path != "." ]]; do path=$(dirname -- "$path"); done
  [[ -e $path && ! -d $path ]]
}
check_arguments=0
[[ -n "$backends" || "$dtypes" != all || ${#model[@]} -gt 0 ]] && check_arguments=1
if [[ ${#results[@]} -gt 0 ]]; then
  compgen -G "${results[1]}/*.csv" >/dev/null || file_in_the_way "${results[1]}" && check_arguments=1
  [[ $plots_only -eq 1 && ! ( -d ${results[1]} && -r ${results[1]} && -x ${results[1]} ) ]] && check_arguments=1
fi
[[ ${#plots[@]} -gt 0 ]] && file_in_the_way "${plots[1]}" && check_arguments=1
if [[ $check_arguments -eq 1 ]]; then
  "$PYTHON" - "$backends" "$dtypes" "${results[1]:-}" "${plots[1]:-}" "${model[1]:-}" "$plots_only" <<'PY'
import sys
from pathlib import Path
try:
    from backends import precision, registry
    from gpt2.config import ModelDirError
    from gpt2.weights import resolve
    from harness.cli import CommandError, folder_to_read, no_file_in_the_way, not_a_gpu_folder

    backends, dtypes, results, plots, model, plots_only = sys.argv[1:7]
    problems = []
    try:
        if backends:
            registry.select(backends)
    except registry.UnknownBackendError as err:
        problems.append(f"--backends: {err}")
    try:
        precision.select(dtypes)
    except precision.UnknownDtypeError as err:
        problems.append(f"--dtypes: {err}")
    try:
        if results:  # --plots-only reads it; a sweep makes it when it writes the first row
            not_a_gpu_folder(Path(results))
            (folder_to_read if plots_only == "1" else no_file_in_the_way)(Path(results), "--results-dir")
    except CommandError as err:
        problems.append(str(err))
    try:
        if plots:  # whether it can be written in, the plots stage says
            no_file_in_the_way(Path(plots), "--plots-dir")
    except CommandError as err:
        problems.append(str(err))
    try:
        if model:
            resolve(model).check()  # config.json and model.safetensors' header, not the weights
    except ModelDirError as err:
        problems.append(f"--model-dir: {err}")
    for problem in problems:
        print(f"run_all.sh: {problem}", file=sys.stderr)
    sys.exit(2 if problems else 0)
except KeyboardInterrupt:
    sys.exit(130)
PY
fi

# 3. The stages, each timed; the times are printed at the end, also after a failure.
stage_names=() stage_seconds=() stage_status=() sweep_start=$SECONDS
precompile_pids=() precompile_logs=()  # the background compilers (below) and their logs
stop_precompile() {  # on any exit: no compiler outlives the sweep
  [[ ${#precompile_pids[@]} -gt 0 ]] || return 0
  kill "${precompile_pids[@]}" 2>/dev/null
  wait "${precompile_pids[@]}" 2>/dev/null
  rm -f "${precompile_logs[@]}"
}
run_started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
print_times() {
  [[ ${#stage_names[@]} -gt 0 ]] || return 0
  printf '\n== stage times\n'
  for i in "${!stage_names[@]}"; do printf '  %-18s %5d s\n' "${stage_names[$i]}" "${stage_seconds[$i]}"; done
  printf '  %-18s %5d s\n' "total" "$((SECONDS - sweep_start))"
}
trap 'stop_precompile; print_times' EXIT
# A stage runs in the background and is waited for, so that a signal to this script is
# handled at once (bash runs a trap only after a foreground command ends); `trap - INT` gives
# it back Ctrl-C, which bash would otherwise have it ignore.
running_stage="" running_since=0
stage() {  # stage NAME COMMAND...: run, time and record it
  local name=$1 start=$SECONDS status=0
  shift
  printf '\n== %s\n' "$name"
  running_stage=$name running_since=$start
  (trap - INT; exec "$@") &
  wait $! || status=$?
  running_stage=""
  stage_names+=("$name") stage_seconds+=($((SECONDS - start))) stage_status+=("$status")
  return $status
}
# The GPU stages' wall times, stored beside the results (the report shows them), also when the
# sweep was stopped part-way (the stopped stage is named so).
record_stages() {
  [[ ${#stage_names[@]} -gt 0 ]] || return 0
  local recorded=() i
  for i in "${!stage_names[@]}"; do recorded+=("${stage_names[$i]}:${stage_seconds[$i]}:${stage_status[$i]}"); done
  "${harness[@]}" record-stages --run "$run_started" --mode "$([[ ${#quick[@]} -gt 0 ]] && echo quick || echo full)" \
    --backends "$backends" --dtypes "$dtypes" "${results[@]}" "${recorded[@]}" \
    || echo "run_all.sh: the stage times were not stored" >&2
}
# Ctrl-C, SIGTERM (a scheduler's time limit, `timeout`, `kill`) and SIGHUP (a dropped
# session) end the sweep alike: the running stage gets the signal too and keeps every row it
# finished, the stage times are printed, then one line says how to resume.
stopped() {  # stopped SIGNAL EXIT_STATUS
  set +e
  trap '' INT TERM HUP
  local what="stopped by SIG$1" kept="every finished row is kept; to resume where this run stopped"
  [[ $1 == INT ]] && what="interrupted"
  [[ $plots_only -eq 1 ]] && kept="--plots-only measures nothing; to redraw the plots and tables"
  if [[ -n "$running_stage" ]]; then
    for pid in $(jobs -p); do kill -s "$1" "$pid" 2>/dev/null; done  # the stage, once started
    wait
    stage_names+=("$running_stage (stopped)") stage_seconds+=($((SECONDS - running_since))) stage_status+=("$2")
    what="$what during $running_stage"
  fi
  stop_precompile
  trap - EXIT
  print_times
  [[ $plots_only -eq 1 ]] || record_stages
  local command=$0
  [[ ${#original_args[@]} -eq 0 ]] || command+=$(printf ' %q' "${original_args[@]}")
  printf '\nrun_all.sh: %s; %s, run the same command again: %s\n' "$what" "$kept" "$command" >&2
  exit "$2"
}
trap 'stopped INT 130' INT
trap 'stopped TERM 143' TERM
trap 'stopped HUP 129' HUP

harness=("$PYTHON" -m harness)
if [[ -z "$backends" ]]; then
  # --quick leaves out the backends whose registry row says why (python -m harness list).
  if [[ ${#quick[@]} -gt 0 ]]; then backends=quick; else backends=all; fi
fi
# Compile ahead (python -m harness precompile --help): flex-attention's compilations, one
# process per dtype in the background while the build and the gate run (neither is timed);
# every one has ended before the kernel benchmark starts. Their output goes to a log each.
start_precompile() {
  local dtype log
  for dtype in $("$PYTHON" -c 'import sys; from backends import precision; print(*precision.select(sys.argv[1]))' \
                 "$dtypes" 2>/dev/null); do
    log=$(mktemp "${TMPDIR:-/tmp}/run_all.precompile.$dtype.XXXXXX")
    (trap - INT; exec "${harness[@]}" precompile --backends "$backends" --dtypes "$dtype" "${quick[@]}" \
       "${fresh[@]}" "${results[@]}" "${model[@]}" >"$log" 2>&1) &
    precompile_pids+=($!) precompile_logs+=("$log")
  done
}
wait_for_precompile() {  # timed as a stage of its own: the time the sweep waited for it
  [[ ${#precompile_pids[@]} -gt 0 ]] || return 0
  local start=$SECONDS i status
  printf '\n== %s\n' "precompile wait"
  running_stage="precompile wait" running_since=$start
  for i in "${!precompile_pids[@]}"; do
    status=0
    wait "${precompile_pids[$i]}" || status=$?
    if [[ $status -eq 0 ]]; then
      tail -n 1 "${precompile_logs[$i]}"
    else
      echo "precompile failed (exit status $status); the stages compile what they need. Its log ends:"
      tail -n 5 "${precompile_logs[$i]}" | sed 's/^/  /'
    fi
    rm -f "${precompile_logs[$i]}"
  done
  running_stage="" precompile_pids=() precompile_logs=()
  stage_names+=("precompile wait") stage_seconds+=($((SECONDS - start))) stage_status+=(0)
}

if [[ $plots_only -eq 0 ]]; then
  start_precompile
  # A version that fails to build is reported, and the gate leaves it out; the others go on.
  stage build "${harness[@]}" build --backends "$backends" || [[ $? -eq 1 ]]
  # A backend that fails the gate is reported and left out of the timings; the others go on.
  stage "correctness gate" "${harness[@]}" check --backends "$backends" --dtypes "$dtypes" "${fresh[@]}" \
    "${results[@]}" || echo "some backends failed the gate or cannot run here: see above"
  wait_for_precompile
  stage "kernel benchmark" "${harness[@]}" bench-kernels --backends "$backends" --dtypes "$dtypes" "${quick[@]}" \
    "${fresh[@]}" "${results[@]}"
  stage "decode benchmark" "${harness[@]}" bench-decode --backends "$backends" --dtypes "$dtypes" "${quick[@]}" \
    "${fresh[@]}" "${results[@]}"
  stage "end-to-end" "${harness[@]}" bench-e2e --backends "$backends" --dtypes "$dtypes" "${quick[@]}" \
    "${fresh[@]}" "${results[@]}" "${model[@]}"
  record_stages
fi
stage plots "${harness[@]}" plot "${results[@]}" "${plots[@]}"
stage report "${harness[@]}" report "${results[@]}" "${plots[@]}"
