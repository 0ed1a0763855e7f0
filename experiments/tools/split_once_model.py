"""What "split each operand once" should do to version 18 (issue 19), before any kernel: the
per-tile work of three designs against an H100's units, and each one's bound.

    python experiments/tools/split_once_model.py                  # B=8, T=4096 and B=1, T=512
    python experiments/tools/split_once_model.py --l2-tbps 6.0    # another L2 read bandwidth
    python experiments/tools/split_once_model.py --measure-l2     # measure it first (GPU)

The designs, all TF32 x 3 with 64 x 64 tiles and m64n64k8 wgmma (48 per tile: 8 k steps x 3
split products, for S and for P V):

- v18: each block loads raw K_j and V_j (cp.async, 32 KB) and splits them into K_hi, K_lo,
  V_hi^T, V_lo^T in shared memory, once per row block that reads the tile.
- split once, B_r = 64: a pre-pass writes the four parts to global memory once per call; the
  main loop loads them ready (64 KB per tile), with no split pass.
- split once, B_r = 128: the same, with two consumer warpgroups (64 rows each) sharing every
  loaded tile, so each tile is loaded half as often.
- split by a producer, B_r = 128: raw tiles loaded (32 KB) and split in shared memory by
  producer warps, once per loaded tile, for two consumer warpgroups that share it: no
  pre-pass, half version 18's loads and split passes per product.

Per tile and SM: the tensor core's cycles at the wgmma rate measured by version 18's probe,
shared memory's cycles at 128 bytes per cycle (the wgmma's B reads plus the bytes written:
copies and split passes), and the L2 bytes the loads read. Per call: the time each unit
needs, and the largest, the bound; the pre-pass's HBM traffic on top. Version 18's own
numbers (its notes: 1,510 tensor and 1,790 shared-memory cycles per tile, a 1.55 ms bound at
B=8, T=4096, 2.39 ms measured) calibrate the estimate: a design's estimate is its bound over
version 18's fraction of its bound.

The L2 read bandwidth is the constant this rests on: L2_TBPS_H100, measured on an H100 with
--measure-l2 (copies between two buffers that fit in L2; results/nvidia-h100-80gb-hbm3/
experiments/2026-11-24_19_split_once_l2_copy.txt).
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

D = 64  # head dimension
TILE = 64  # keys per tile (B_c) and rows per warpgroup
FLOAT_BYTES = 4
TILE_BYTES = TILE * D * FLOAT_BYTES  # one 64 x 64 float32 operand: 16 KB
WGMMA_PER_TILE = 48  # S and P V, 8 k steps x 3 split products each
WGMMA_FLOP = 2 * 64 * 64 * 8  # m64n64k8
WGMMA_B_BYTES = 64 * 8 * FLOAT_BYTES  # B operand of one m64n64k8: 2 KB

# The H100 as version 18's notes measured it.
SMS = 132
CLOCK_HZ = 1.755e9  # under load
WGMMA_FLOP_PER_CYCLE = 2080  # per SM: the probe's m64n64k8 TF32 rate, A from registers
SMEM_BYTES_PER_CYCLE = 128
HBM_TBPS = 3.35
L2_TBPS_H100 = 4.69  # TB/s, measured with --measure-l2 (see the top of this file)
V18_MEASURED_US = 2391  # B=8, T=4096, H100 (results/, commit 7b9dd4289a70)


@dataclass(frozen=True)
class Design:
    name: str
    rows_per_block: int  # B_r: 64 rows per consumer warpgroup
    bytes_per_load: int  # what a block loads per key tile
    split_pass_bytes: int  # shared-memory bytes the split passes read and write per tile load
    pre_pass: bool  # the four parts written to global memory once per call

    @property
    def consumers(self) -> int:
        return self.rows_per_block // TILE


DESIGNS = (
    # v18: raw K and V in (32 KB); split passes read 32 KB and write 64 KB (its notes).
    Design("v18 (split per row block)", 64, 2 * TILE_BYTES, 2 * TILE_BYTES + 4 * TILE_BYTES, False),
    Design("split once, B_r = 64", 64, 4 * TILE_BYTES, 0, True),
    Design("split once, B_r = 128", 128, 4 * TILE_BYTES, 0, True),
    Design("producer splits, B_r = 128", 128, 2 * TILE_BYTES, 2 * TILE_BYTES + 4 * TILE_BYTES, False),
)


def causal_tile_products(T: int) -> int:
    """64 x 64 (query, key) tile pairs at or below the diagonal, per head."""
    n = -(-T // TILE)
    return n * (n + 1) // 2


def tile_loads(T: int, rows_per_block: int) -> int:
    """Key tiles loaded per head: each row block loads every tile up to its last row."""
    blocks = -(-T // rows_per_block)
    per_block = rows_per_block // TILE
    return sum(min(per_block * (i + 1), -(-T // TILE)) for i in range(blocks))


@dataclass(frozen=True)
class Bounds:
    tensor_cycles: float  # per tile product, per SM
    smem_cycles: float
    tensor_us: float  # per call
    smem_us: float
    l2_gb: float
    l2_us: float
    pre_pass_us: float

    @property
    def bound_us(self) -> float:
        """The busiest unit's time, the pre-pass on top (it runs before, as its own kernel)."""
        return max(self.tensor_us, self.smem_us, self.l2_us) + self.pre_pass_us


def bounds(design: Design, B: int, H: int, T: int, l2_tbps: float) -> Bounds:
    products = B * H * causal_tile_products(T)
    loads = B * H * tile_loads(T, design.rows_per_block)
    tensor_cycles = WGMMA_PER_TILE * WGMMA_FLOP / WGMMA_FLOP_PER_CYCLE
    # Per tile product: the wgmma's B reads, plus this product's share of the tile's load and split.
    smem_bytes = WGMMA_PER_TILE * WGMMA_B_BYTES + (design.bytes_per_load + design.split_pass_bytes) * loads / products
    smem_cycles = smem_bytes / SMEM_BYTES_PER_CYCLE
    per_sm = products / SMS
    l2_bytes = loads * design.bytes_per_load
    # The pre-pass reads K and V and writes their four parts: 6 operands of B H T d floats.
    pre_pass_bytes = 6 * B * H * T * D * FLOAT_BYTES if design.pre_pass else 0
    return Bounds(tensor_cycles=tensor_cycles, smem_cycles=smem_cycles,
                  tensor_us=per_sm * tensor_cycles / CLOCK_HZ * 1e6, smem_us=per_sm * smem_cycles / CLOCK_HZ * 1e6,
                  l2_gb=l2_bytes / 1e9, l2_us=l2_bytes / (l2_tbps * 1e12) * 1e6,
                  pre_pass_us=pre_pass_bytes / (HBM_TBPS * 1e12) * 1e6)


def measure_l2_tbps() -> float:
    """L2 bandwidth: bytes read and written by a copy between two 8 MB float32 buffers (both
    L2-resident on an H100's 50 MB L2), CUDA-graph replays of 100 copies, the best of 5. (A
    reduction, this probe's first form, launches too few blocks to saturate L2: it read
    1.74 TB/s, below what version 18 itself draws from L2.)"""
    import torch

    x = torch.randn(2 * 2**20, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(100):
            y.copy_(x)
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return 100 * 2 * x.numel() * 4 / best / 1e12


def report(B: int, H: int, T: int, l2_tbps: float) -> str:
    v18 = bounds(DESIGNS[0], B, H, T, l2_tbps)
    lines = [f"B={B}, H={H}, T={T}: {B * H * causal_tile_products(T):,} tile products; L2 at {l2_tbps:.1f} TB/s",
             "cycles per tile product and SM (tensor, smem); per call: L2 GB read, µs per unit, bound",
             f"{'design':28}{'tensor':>8}{'smem':>7}{'L2 GB':>8}{'tensor µs':>11}{'smem µs':>9}{'L2 µs':>8}"
             f"{'pre-pass':>10}{'bound µs':>10}"]
    for design in DESIGNS:
        b = bounds(design, B, H, T, l2_tbps)
        lines.append(f"{design.name:28}{b.tensor_cycles:>8.0f}{b.smem_cycles:>7.0f}{b.l2_gb:>8.3f}"
                     f"{b.tensor_us:>11.1f}{b.smem_us:>9.1f}{b.l2_us:>8.1f}{b.pre_pass_us:>10.1f}{b.bound_us:>10.1f}")
    if (B, T) == (8, 4096):
        fraction = v18.bound_us / V18_MEASURED_US
        lines.append(f"version 18 measured {V18_MEASURED_US:,} µs: its bound is {fraction:.0%} of that; "
                     "at the same fraction (the same serialised block):")
        for design in DESIGNS[1:]:
            lines.append(f"  {design.name}: {bounds(design, B, H, T, l2_tbps).bound_us / fraction:,.0f} µs")
    else:
        lines.append("(at this size latency and launch bound every design: these units' times are not the kernel's)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = arguments.OneLineParser(prog="split_once_model.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--l2-tbps", type=float, default=L2_TBPS_H100,
                        help=f"L2 read bandwidth in TB/s (default: {L2_TBPS_H100}, an H100's, measured)")
    parser.add_argument("--measure-l2", action="store_true", help="measure the L2 read bandwidth first (GPU)")
    args = parser.parse_args(argv)
    if not 0 < args.l2_tbps < math.inf:
        parser.error(f"--l2-tbps must be a positive finite number, got {args.l2_tbps}")
    if args.measure_l2:
        import torch

        if not torch.cuda.is_available():
            parser.error("--measure-l2 needs a GPU, and no CUDA device is available; --l2-tbps gives the bandwidth")
    l2 = measure_l2_tbps() if args.measure_l2 else args.l2_tbps
    if args.measure_l2:
        print(f"L2 read bandwidth, measured: {l2:.2f} TB/s")
    print(report(8, 12, 4096, l2))
    print()
    print(report(1, 12, 512, l2))


if __name__ == "__main__":
    main()
