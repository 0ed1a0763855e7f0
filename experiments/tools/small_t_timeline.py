"""Where a small call's time goes, block by block (GPU to record, no GPU to summarise).

`h14t_1_small_t_timeline.patch` makes every block of h14 record SM clock readings of its
first item (entry, barriers synced, the producer's item decoded, Q's and K_0's copies
issued, every copy issued, Q landed, each key tile landed, each softmax done, the products
done, the rows stored) and the global timer at entry and at the end; a one-thread kernel
launched after it prints them as lines "TS block f0 .. f23". `h14s_1` is the first version
of the patch, without the three producer readings (20 fields); `h14v_2` and `h14d_2` are
the readings on top of `h14v_1_v_lands_apart` and `h14d_1_item_handed_over`; `h14k_2` on top
of `h14k_1_narrow_key_halves`, with the lower key half's readings (32 fields; the upper
half's tiles are numbered from its first); `h15c_2` the same on top of h15 and
`h15c_1_column_halves`.

    python experiments/tools/small_t_timeline.py record --T 64,128,256,512 > timeline.txt
    python experiments/tools/small_t_timeline.py record --no-flush > warm_timeline.txt
    python experiments/tools/small_t_timeline.py summarise timeline.txt

`record` calls the patched kernel after an L2 flush (as the benchmark's timings do) and
prints the device time of the unpatched version beside it, so that the block timeline can
be set against the whole call's time; `--no-flush` leaves the inputs in L2 (a warm call).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backends import arguments  # noqa: E402
from item_timeline import FALLBACK_GHZ as GHZ  # noqa: E402  (cycles to µs, h10's timelines)

DEFAULT_VARIANT = "t=h14+experiments/h14/h14t_1_small_t_timeline.patch"
FIELDS = (20, 24, 32)  # h14s_1; h14t_1, h14d_2, h14v_2; h14k_2
# Field numbers of the patch's g_tl rows.
N, ROW_BLOCK, NS_ENTRY, CLK_ENTRY, CLK_ISSUED, CLK_Q = 0, 1, 2, 3, 4, 5
CLK_LANDED, CLK_SOFTMAX = 6, 10  # + t, t = 0..3
CLK_PRODUCTS, CLK_STORED, NS_END, CLK_SYNCED, CLK_CLAIMED = 14, 15, 16, 17, 18
CLK_DECODED, CLK_Q_ISSUED, CLK_K0_ISSUED = 19, 20, 21  # not in h14s_1
# h14k_2 only: the lower key half's first and second tiles landed and softmaxes done, its
# products done, and the upper half past the merge's barrier.
LOW_LANDED, LOW_SOFTMAX, LOW_LANDED_1, LOW_SOFTMAX_1, LOW_PRODUCTS, MERGE_WAITED = range(24, 30)
TILES_RECORDED = 4


def record(args: argparse.Namespace) -> int:
    import torch

    from backends import precision, registry
    from harness import variants
    from harness.device_timing import DeviceTimer
    from harness.reference import random_qkv
    from harness.study import GPT2_HEADS, Shape

    if min(args.B, args.calls) < 1:
        raise SystemExit("--B and --calls must be at least 1")
    if not torch.cuda.is_available():
        raise SystemExit("record needs a CUDA device (summarise does not)")
    device = torch.device("cuda")
    timer = DeviceTimer(device)
    patched = variants.materialize(variants.parse_spec(args.variant)).attention(device, args.dtype)
    plain = registry.get(args.plain).attention(device, args.dtype)
    for T in args.T:
        shape = Shape(args.B, GPT2_HEADS, T)
        q, k, v = random_qkv(shape, seed=T, device=device, dtype=precision.torch_dtype(args.dtype))
        timing = timer.time(lambda: plain(q, k, v, shape.H))
        print(f"# B={args.B} T={T}: {args.plain} device time {timing.us_device_median:.2f} us", flush=True)
        for call in range(args.calls):
            if not args.no_flush:
                timer.flush()
            print(f"# B={args.B} T={T} call {call}" + (" (warm L2)" if args.no_flush else ""), flush=True)
            patched(q, k, v, shape.H)
            torch.cuda.synchronize(device)  # the dump kernel's printf lands here
            sys.stdout.flush()
    return 0


def sequence_lengths(text: str) -> list[int]:
    """'64,128,512' -> [64, 128, 512], each at least 1."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write sequence lengths as integers, comma-separated") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every sequence length must be at least 1")
    return values


def read(path: Path) -> dict[str, list[list[int]]]:
    """The last call's rows per '# B=.. T=..' section."""
    sections: dict[str, list[list[int]]] = {}
    key = None
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if line.startswith("# B=") and " call " in line:
            key = line[2:line.index(" call ")]
            sections[key] = []  # a later call replaces an earlier one
        elif line.startswith("TS "):
            fields = line.split()[1:]
            if key is None or len(fields) - 1 not in FIELDS or not all(f.lstrip("-").isdigit() for f in fields[1:]):
                raise SystemExit(f"{path}:{number}: a 'TS' line outside a call, or not 1 + {FIELDS} integers")
            sections[key].append([int(f) for f in fields[1:]])
    return sections


def summarise(args: argparse.Namespace) -> int:
    for path in args.files:
        if not path.is_file():
            raise SystemExit(f"{path} is a folder, not a file" if path.is_dir() else f"{path}: no such file")
        for key, rows in read(path).items():
            rows = [r for r in rows if r[N] >= 0]  # blocks whose recording warpgroup computed
            if not rows:
                continue
            t0 = min(r[NS_ENTRY] for r in rows)
            span = (max(r[NS_END] for r in rows) - t0) / 1e3
            entries = sorted((r[NS_ENTRY] - t0) / 1e3 for r in rows)
            print(f"== {key}: {len(rows)} blocks; first entry to last end {span:.2f} us (global timer); "
                  f"entries spread over {entries[-1]:.2f} us (median {statistics.median(entries):.2f})")
            names = [("barriers synced", CLK_SYNCED), ("consumer registers", CLK_CLAIMED)]
            if len(rows[0]) > CLK_K0_ISSUED:
                names += [("producer: item decoded", CLK_DECODED), ("Q issued", CLK_Q_ISSUED),
                          ("K_0 issued", CLK_K0_ISSUED)]
            names += [("producer: loads issued", CLK_ISSUED), ("Q landed", CLK_Q)]
            if len(rows[0]) > MERGE_WAITED:
                names += [("lower half: tile 0 landed", LOW_LANDED), ("lower softmax 0 done", LOW_SOFTMAX),
                          ("lower tile 1 landed", LOW_LANDED_1), ("lower softmax 1 done", LOW_SOFTMAX_1),
                          ("lower products done", LOW_PRODUCTS), ("upper: merge barrier passed", MERGE_WAITED)]
            names += [(f"tile {t} landed", CLK_LANDED + t) for t in range(TILES_RECORDED)]
            names += [(f"softmax {t} done", CLK_SOFTMAX + t) for t in range(TILES_RECORDED)]
            names += [("products done", CLK_PRODUCTS), ("rows stored", CLK_STORED)]
            longest = max(r[N] for r in rows)
            for n in sorted({r[N] for r in rows}):
                group = [r for r in rows if r[N] == n]
                line = [f"  n={n} ({len(group)} blocks), µs after entry, median:"]
                for name, f in names:
                    values = [(r[f] - r[CLK_ENTRY]) / GHZ / 1e3 for r in group if r[f] >= 0]
                    if values:
                        line.append(f"{name} {statistics.median(values):.2f}")
                print("; ".join(line) if n == longest or args.all else line[0] + " " + "; ".join(line[-1:]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="small_t_timeline.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("record", help="call the patched kernel after L2 flushes and print its timeline (GPU)")
    p.add_argument("--variant", type=arguments.text, default=DEFAULT_VARIANT,
                   help=f"NAME=VERSION+PATCH (default: {DEFAULT_VARIANT})")
    p.add_argument("--plain", type=arguments.text, default="h14",
                   help="the unpatched backend timed beside it (default: h14)")
    p.add_argument("--B", type=int, default=1, help="batch (default: 1)")
    p.add_argument("--T", type=sequence_lengths, default=[64, 128, 256, 512],
                   help="sequence lengths, comma-separated (default: 64,128,256,512)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"), help="(default: bfloat16)")
    p.add_argument("--calls", type=int, default=3, help="calls per shape; the last is summarised (default: 3)")
    p.add_argument("--no-flush", action="store_true", help="no L2 flush before the calls: inputs already in L2")
    p.set_defaults(func=record)
    p = sub.add_parser("summarise", help="per shape, when the blocks' steps happen (no GPU)")
    p.add_argument("files", nargs="+", type=arguments.path, help="output of `record`")
    p.add_argument("--all", action="store_true", help="every tile count's steps, not only the longest blocks'")
    p.set_defaults(func=summarise)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
