"""Summarises the per-step timeline that experiments/h20/h20t_1_step_timeline.patch prints: where
a consumer warpgroup of the three-consumer kernel spends each step (block 0 only).

    python -m harness call --dtype bfloat16 --B 8 --T 4096 --repeat 2 \\
        t=h20+experiments/h20/h20t_1_step_timeline.patch > timeline.txt
    python experiments/tools/step_timeline.py timeline.txt

Each line "TS w x t e0 .. e7" is step x of warpgroup w (t: the step's tile within its item)
with 8 SM clock readings (clock64, relative to warpgroup 0's first step): step start, tile
landed, turn taken, S issued, all issued (turn passed), S complete, softmax done, P V
complete. Only the last launch in a file is read (each launch prints all its lines again).
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

EVENTS = ("start", "landed", "turn", "S issued", "all issued", "S done", "softmax", "PV done")
# (label, from event, to event): the phases of a step, in order.
PHASES = (
    ("wait for the tile", 0, 1),
    ("wait for the turn", 1, 2),
    ("issue S", 2, 3),
    ("rescale, issue P V, pass", 3, 4),
    ("wait for S", 4, 5),
    ("softmax", 5, 6),
    ("wait for P V", 6, 7),
)


def read_last_launch(path: Path) -> dict[int, list[tuple[int, ...]]]:
    """Warpgroup -> its steps, each (t, e0 .. e7), from the last launch in the file."""
    launches: list[dict[int, list[tuple[int, ...]]]] = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.startswith("TS "):
            continue
        fields = line.split()[1:]
        if len(fields) != 3 + len(EVENTS) or not all(f.lstrip("-").isdigit() for f in fields):
            raise SystemExit(f"{path}:{number}: expected 'TS' and {3 + len(EVENTS)} integers")
        w, x, *rest = (int(f) for f in fields)
        if w == 0 and x == 0:
            launches.append({})
        if not launches:
            raise SystemExit(f"{path}:{number}: a step before warpgroup 0's first")
        launches[-1].setdefault(w, []).append(tuple(rest))
    if not launches:
        raise SystemExit(f"{path}: no 'TS' lines (was the timeline patch applied?)")
    return launches[-1]


def summarise(path: Path) -> None:
    steps = read_last_launch(path)
    print(f"{path}: block 0, {sum(len(v) for v in steps.values())} steps")
    for first in (False, True):
        kind = "an item's first step (t = 0)" if first else "the loop's steps (t >= 1)"
        print(f"\n{kind}: median cycles per warpgroup")
        print(f"  {'phase':28s}" + "".join(f"{'wg ' + str(w):>8s}" for w in sorted(steps)))
        for label, a, b in PHASES:
            cells = []
            for w in sorted(steps):
                durations = [s[1 + b] - s[1 + a] for s in steps[w] if (s[0] == 0) == first]
                cells.append(f"{statistics.median(durations):8.0f}" if durations else f"{'-':>8s}")
            print(f"  {label:28s}" + "".join(cells))
        cells = []
        for w in sorted(steps):
            rows = steps[w]
            periods = [rows[x + 1][1] - rows[x][1] for x in range(len(rows) - 1)
                       if (rows[x][0] == 0) == first]
            cells.append(f"{statistics.median(periods):8.0f}" if periods else f"{'-':>8s}")
        print(f"  {'step start to next start':28s}" + "".join(cells))
    # The turns: the time between warpgroup 0's turn and the next warpgroup's, round by round.
    turns = sorted((s[1 + 2], w) for w in steps for s in steps[w])
    gaps = [b[0] - a[0] for a, b in zip(turns, turns[1:])]
    if gaps:
        print(f"\nturn to turn (any warpgroup): median {statistics.median(gaps):.0f} cycles, "
              f"{len(gaps)} turns")


def main(argv: Sequence[str] | None = None) -> None:
    parser = arguments.OneLineParser(prog="step_timeline.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=arguments.path, help="outputs of the patched kernel")
    args = parser.parse_args(argv)
    for path in args.files:
        if not path.is_file():
            parser.error(f"{path} is a folder, not a file" if path.is_dir() else f"{path}: no such file")
    for path in args.files:
        summarise(path)


if __name__ == "__main__":
    main()
