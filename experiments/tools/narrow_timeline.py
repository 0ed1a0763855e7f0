"""Where a float32 narrow block's time goes, step by step (no GPU: summarises a recording).

`v22t_1_timeline.patch` to `v26t_1_timeline.patch` (one per version, 22-26) make every block
of the narrow kernel record SM clock readings (`clock64`, cycles of the block's own SM) and
a one-thread kernel launched after it print them as lines
"TS block f0 .. f79". Record them on a GPU with, e.g.,

    python -m harness call "v22t=v22+experiments/v22/v22t_1_timeline.patch" \\
      --B 1 --T 512 --dtype float32 --repeat 3 > timeline.txt

(three calls, the later ones with K, V and Q warm in L2; the logs under
results/nvidia-h200/experiments/ keep the last call's lines), then summarise them here:

    python experiments/tools/narrow_timeline.py timeline.txt --blocks 0,12

The fields, as the patches number them (cycles, 0 = not recorded):
- 0 entry, 1 n (the block's key tiles), 2 Q split into registers, 3 K_0 ready (the
  consumer's wait done), 4 S_0 complete, 5 S_0's softmax and P_0's split done;
- for loop step j = 1 .. 8, at 6 + 4 (j - 1): its barrier waits done, S_j complete, the
  softmax of S_j done, P_{j-1} V_{j-1} complete (`v25s_2_timeline.patch`, whose steps run in
  another order: the wait for V_{j-1} done, the softmax of S_j done, P_{j-1} V_{j-1}
  complete and joined, S_{j+1} complete; the columns' names then do not apply);
- 35 (v24) the merge's path begun (before the look at the other piece's counter), 36 (v24)
  counted finished (a piece that wrote its partial), 37 (v24) merged; in v26 (the merge in a
  cluster) 35 is piece 0's wait for the inbox begun, or piece 1's wait at the cluster barrier,
  36 piece 1's stores into piece 0's inbox issued (printed as "counted"), 37 piece 0 merged;
  38 the last P V complete, 39 the rows stored;
- for the producer's tile t = 0 .. 7, at 40 + 5 t: raw tile t landed, K_{t-2} released, K_t
  split and ready, V_{t-2} released, V_t split and ready.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

FIELDS = 80
ENTRY, TILES, Q_SPLIT, K0_READY, S0_DONE, STEP0_DONE = range(6)
STEP_BASE, STEP_FIELDS, STEPS_RECORDED = 6, 4, 8
MERGE_BEGUN, COUNTED, MERGED, LAST_PV, STORED = 35, 36, 37, 38, 39
PRODUCER_BASE, PRODUCER_FIELDS, TILES_RECORDED = 40, 5, 8


@dataclass(frozen=True)
class Block:
    index: int
    fields: tuple[int, ...]  # FIELDS readings, as recorded

    def at(self, field: int) -> int | None:
        """Cycles after the block's entry, or None where the reading was not recorded."""
        value = self.fields[field]
        return value - self.fields[ENTRY] if value else None

    @property
    def tiles(self) -> int:
        return self.fields[TILES]


def last_call(lines: Sequence[str]) -> list[Block]:
    """The blocks of the file's last call: the 'TS' lines after the last block 0's line."""
    blocks: list[Block] = []
    for line in lines:
        if not line.startswith("TS "):
            continue
        words = line.split()
        index, readings = int(words[1]), tuple(int(w) for w in words[2:])
        if len(readings) != FIELDS:
            raise ValueError(f"a TS line with {len(readings)} readings, not {FIELDS}: {line[:60]}...")
        if index == 0:
            blocks = []  # a new call begins
        blocks.append(Block(index, readings))
    if not blocks:
        raise ValueError("no 'TS' lines: is this a timeline patch's output?")
    return blocks


def step_rows(block: Block) -> list[tuple[int, int, int, int, int]]:
    """Per loop step j (1 .. min(n, 9) - 1): cycles from the previous step's end to its
    waits done, S_j's run, the softmax, the wait for P_{j-1} V_{j-1} after it, and when it
    ended (cycles after entry)."""
    rows = []
    previous = block.at(STEP0_DONE)
    for j in range(1, min(block.tiles, STEPS_RECORDED + 1)):
        waits, s_done, softmax, pv = (block.at(STEP_BASE + STEP_FIELDS * (j - 1) + f)
                                      for f in range(STEP_FIELDS))
        if None in (previous, waits, s_done, softmax, pv):
            break
        rows.append((j, waits - previous, s_done - waits, softmax - s_done, pv - softmax))
        previous = pv
    return rows


def producer_rows(block: Block) -> list[tuple[int, int | None, int | None, int | None]]:
    """Per tile t: when raw tile t had landed (cycles after entry), and the cycles of K's
    split and of V's split (each after its stage's release)."""
    rows = []
    for t in range(min(block.tiles, TILES_RECORDED)):
        landed, k_free, k_ready, v_free, v_ready = (block.at(PRODUCER_BASE + PRODUCER_FIELDS * t + f)
                                                    for f in range(PRODUCER_FIELDS))
        k_split = k_ready - k_free if k_ready is not None and k_free is not None else None
        v_split = v_ready - v_free if v_ready is not None and v_free is not None else None
        rows.append((t, landed, k_split, v_split))
    return rows


def summarise(blocks: Sequence[Block], chosen: Sequence[int]) -> str:
    by_index = {b.index: b for b in blocks}
    out = []
    for index in chosen:
        if index not in by_index:
            raise ValueError(f"block {index} is not in the recording ({len(blocks)} blocks)")
        b = by_index[index]
        out.append(f"block {index}: {b.tiles} tiles; Q split at {b.at(Q_SPLIT)}, K_0 ready at "
                   f"{b.at(K0_READY)}, S_0 done at {b.at(S0_DONE)}, step 0 done at "
                   f"{b.at(STEP0_DONE)} cycles")
        out.append("  step  to waits done  S_j  softmax  P V after it")
        for j, waits, s, softmax, pv in step_rows(b):
            out.append(f"  {j:4d}  {waits:13d}  {s:4d}  {softmax:7d}  {pv:12d}")
        merge = [(name, b.at(f)) for name, f in (("merge begun", MERGE_BEGUN),
                                                 ("counted", COUNTED), ("merged", MERGED))]
        out.append(f"  last P V at {b.at(LAST_PV)}, rows stored at {b.at(STORED)}"
                   + "".join(f", {name} at {at}" for name, at in merge if at is not None))
        out.append("  tile  landed at  K split  V split")
        for t, landed, k_split, v_split in producer_rows(b):
            out.append(f"  {t:4d}  {landed!s:>9}  {k_split!s:>7}  {v_split!s:>7}")
    return "\n".join(out)


def role(block: Block) -> str:
    """'piece 0' (merged the other piece's partial), 'piece 1' (stored its partial into piece
    0's inbox) or 'whole' (an unsplit row block)."""
    if block.at(MERGED) is not None:
        return "piece 0"
    if block.at(STORED) is None and block.at(COUNTED) is not None:
        return "piece 1"
    return "whole"


def end(block: Block) -> int | None:
    """When the block's last work was issued: its rows stored, or (piece 1) its partial."""
    return block.at(STORED) if block.at(STORED) is not None else block.at(COUNTED)


def spread(values: Sequence[int | None]) -> str:
    """min / median / max of the recorded values, or '-' where none was recorded."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return "-"
    return f"{known[0]} / {known[len(known) // 2]} / {known[-1]}"


def overview(blocks: Sequence[Block]) -> str:
    """Every block of the call, grouped by its tiles and role: how many, and min / median /
    max of raw tile 0 landed, K_0 ready and the end (cycles after each block's entry); for
    piece 1 also its partial's stores into piece 0 (from the wait at the cluster barrier to
    the last store issued). The group with the latest end is where the call ends."""
    groups: dict[tuple[int, str], list[Block]] = {}
    for b in blocks:
        groups.setdefault((b.tiles, role(b)), []).append(b)
    last = max(blocks, key=lambda b: end(b) or 0)
    out = [f"{len(blocks)} blocks; the last to end: block {last.index} ({last.tiles} tiles, "
           f"{role(last)}) at {end(last)} cycles",
           "  tiles  role     blocks  tile 0 landed        K_0 ready            end"
           "                  partial's stores"]
    for (tiles, name), members in sorted(groups.items()):
        stores = [b.at(COUNTED) - b.at(MERGE_BEGUN) for b in members
                  if name == "piece 1" and b.at(COUNTED) is not None and b.at(MERGE_BEGUN) is not None]
        out.append(f"  {tiles:5d}  {name:7s}  {len(members):6d}  "
                   f"{spread([b.at(PRODUCER_BASE) for b in members]):19s}  "
                   f"{spread([b.at(K0_READY) for b in members]):19s}  "
                   f"{spread([end(b) for b in members]):19s}  {spread(stores)}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.OneLineParser(
        prog="narrow_timeline.py",
        description="Summarise a float32 narrow-kernel timeline (versions 22-24's timeline "
                    "patches): per block, each step's waits, S, softmax and P V, and the "
                    "producer's split passes, in SM cycles.")
    parser.add_argument("file", type=arguments.path, help="the recorded output (lines 'TS block f0 .. f79')")
    parser.add_argument("--blocks", type=arguments.text, default="0",
                        help="comma-separated block indices to show (default: 0, a longest block)")
    parser.add_argument("--overview", action="store_true",
                        help="instead of single blocks, every block grouped by its tiles and role "
                             "(whole row block, piece 0, piece 1): min / median / max of tile 0's "
                             "landing, K_0 ready and the end, and which block ends the call")
    args = parser.parse_args(argv)
    try:
        chosen = [int(x) for x in args.blocks.split(",") if x.strip()]
        blocks = last_call(args.file.read_text().splitlines())
        print(overview(blocks) if args.overview else summarise(blocks, chosen))
    except (OSError, ValueError) as err:
        print(f"narrow_timeline: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
