"""The floor under the decode track: how fast this GPU reads a decode call's K and V caches,
and nothing else, timed beside d09 and PyTorch's kernels in the same run with the harness's
timer (a CUDA graph of R x [L2 flush, call] minus the flushes, rounds alternating).

The reads (read_floor.cu) take equal shares of the caches, so their balance across blocks
is perfect at every shape; they differ in how the bytes are requested (16-byte loads into
registers, version 8's, or the copy engine's one-dimensional bulk copies into a ring of
shared memory) and in what order: each block a contiguous share, a copy's windows (at each
step the blocks side by side), the same in chunks of whole rows, version 9's order, head by
head, or cuDNN's (a block per head, tiles of 128 rows by cp.async). Each is first checked to read every word once (the XOR of what it read against the
caches'). Where the fastest read is no faster than a target asks,
the target is below this GPU's floor for that many bytes.

    python experiments/d09/read_floor.py [--dtype bfloat16] [--rounds 2] [--batches 1,8]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.utils.cpp_extension import load

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from backends import arguments, precision, registry  # noqa: E402
from harness.bench_decode import fastest_baseline  # noqa: E402
from harness.bench_kernels import in_rounds  # noqa: E402
from harness.decode_calls import call_decode  # noqa: E402
from harness.decode_inputs import random_decode_inputs  # noqa: E402
from harness.device_timing import DeviceTimer, measure_bandwidth  # noqa: E402
from harness.study import DECODE_BATCHES, DECODE_LENGTHS, GPT2_HEADS  # noqa: E402

MAX_BLOCKS_PER_SM, MAX_WARPS = 8, 8  # the largest launch below: its out words


@dataclass(frozen=True)
class Read:
    """One way of reading the caches: read_floor.cu's `kind` with its arguments."""

    name: str
    kind: str  # "loads" (threads, unroll, per SM), "windows" (per SM), "chunks" (rows, per
    # SM), "bulk" (stages, chunk KB, per SM), "heads" (heads per sequence, per SM) or "tiles"
    # (heads per sequence, stages)
    args: tuple[int, ...]

    def call(self, ext, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
        getattr(ext, self.kind)(k, v, out, *self.args)


READS = (
    Read("loads 256x4 2/SM", "loads", (256, 4, 2)),  # version 8's block: 64-128 KB per SM
    Read("windows 4/SM", "windows", (4,)),  # a copy's order
    Read("chunks 64r 4/SM", "chunks", (64, 4)),  # the same, 64 whole rows a block
    Read("bulk 4x8K 3/SM", "bulk", (4, 8, 3)),  # 192 KB in flight per SM
    Read("heads 2/SM", "heads", (GPT2_HEADS, 2)),  # d09's order, balanced
    Read("tiles 2 stages", "tiles", (GPT2_HEADS, 2)),  # cuDNN's schedule: a block per head
    Read("tiles 3 stages", "tiles", (GPT2_HEADS, 3)),
)
KERNELS = {  # dtype: the kernels timed beside the reads
    precision.BFLOAT16: ("d09", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient"),
    precision.FLOAT16: ("d09", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient"),
    precision.FLOAT32: ("d09", "naive", "sdpa-efficient", "sdpa-math"),
}


def batch_list(text: str) -> tuple[int, ...]:
    """--batches: positive ints, comma-separated."""
    try:
        batches = tuple(int(b) for b in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must be comma-separated integers, got {text!r}") from None
    if not batches or min(batches) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be at least 1, got {text!r}")
    return batches


def build():
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    return load(name="read_floor", sources=[str(Path(__file__).with_suffix(".cu"))],
                extra_cuda_cflags=["-O3", "-std=c++17"], verbose=False)


def xor_words(t: torch.Tensor) -> int:
    """The XOR of a contiguous tensor's 32-bit words."""
    words = t.contiguous().view(torch.int32).cpu().numpy().view(np.uint32)
    return int(np.bitwise_xor.reduce(words.ravel()))


def check_reads(ext, device: torch.device, dtype: torch.dtype, out: torch.Tensor) -> list[str]:
    """Each read over B=3, S=1000 caches: the XOR of its warps' stores must equal the caches'
    (every word read an odd number of times; a share skipped or read twice changes it)."""
    x = random_decode_inputs(3, GPT2_HEADS, 1000, [1000] * 3, seed=1, device=device, dtype=dtype)
    want = xor_words(x.k_cache) ^ xor_words(x.v_cache)
    failed = []
    for r in READS:
        out.zero_()
        r.call(ext, x.k_cache, x.v_cache, out)
        got = xor_words(out)
        ok = got == want
        print(f"check {r.name:18s} XOR {got:08x}, caches' {want:08x}: {'ok' if ok else 'FAILED'}")
        if not ok:
            failed.append(r.name)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="read_floor.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default=precision.BFLOAT16, choices=sorted(KERNELS),
                        help="the caches' dtype (default: bfloat16)")
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, 11), metavar="1..10",
                        help="timing rounds, the order alternating (default: 2)")
    parser.add_argument("--batches", type=batch_list, default=DECODE_BATCHES,
                        help="batch sizes, comma-separated (default: the decode grid's)")
    args = parser.parse_args(argv)
    batches = args.batches
    if not torch.cuda.is_available():
        parser.error("no CUDA device is available: the floor is read on a GPU")
    device = torch.device("cuda")
    dtype = precision.torch_dtype(args.dtype)
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}, {args.dtype}, "
          f"{args.rounds} rounds")
    ext = build()
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    out = torch.zeros(MAX_BLOCKS_PER_SM * sms * MAX_WARPS, dtype=torch.int32, device=device)
    failed = check_reads(ext, device, dtype, out)
    if failed:
        print(f"SOME READS FAILED: {', '.join(failed)}; nothing timed")
        return 1
    bandwidth = measure_bandwidth(device)
    print(f"copy: {bandwidth.gbps:.0f} GB/s (read + written)")
    backends = {name: registry.get(name) for name in KERNELS[args.dtype]}
    functions = {name: b.timed_decode(device, args.dtype) for name, b in backends.items()}
    timer = DeviceTimer(device)
    names = [*backends, *(r.name for r in READS)]
    print("\nµs (device median over the rounds); in brackets the fraction of the copy's rate;"
          " last columns: the fastest read over the fastest PyTorch kernel, d09 over both")
    print(f"{'B':>4} {'L':>6} " + " ".join(f"{n:>17s}" for n in names) + "  read/PyTorch  d09/PyTorch  d09/read")
    for B in batches:
        for L in DECODE_LENGTHS:
            x = random_decode_inputs(B, GPT2_HEADS, L, [L] * B, seed=B * 100003 + L, device=device, dtype=dtype)
            calls: dict[str, Callable[[], object]] = {
                name: (lambda b=backends[name], f=functions[name]:
                       call_decode(b, f, x.q, x.k_cache, x.v_cache, x.lengths, x.host_lengths, GPT2_HEADS))
                for name in backends}
            calls.update({r.name: (lambda r=r: r.call(ext, x.k_cache, x.v_cache, out)) for r in READS})
            timings = in_rounds(names, args.rounds, lambda n, plan: timer.time(calls[n], plan=plan))
            us = {n: t.us_device_median for n, t in timings.items()}
            read_bytes = 2 * x.k_cache.numel() * x.k_cache.element_size()
            cells = " ".join(f"{us[n]:9.1f} ({read_bytes / us[n] / 1e3 / bandwidth.gbps:4.2f})" for n in names)
            pytorch = fastest_baseline({n: us[n] for n in backends})
            fastest_read = min(us[r.name] for r in READS)
            print(f"{B:4d} {L:6d} {cells}  {fastest_read / pytorch[1]:5.2f} {pytorch[0]:>14s}"
                  f"  {us['d09'] / pytorch[1]:5.2f}  {us['d09'] / fastest_read:5.2f}", flush=True)
            del x, calls
    spreads = statistics.median((max(t.us_device) - min(t.us_device)) / t.us_device_median
                                for t in timings.values() if t.us_device)
    print(f"\n(the last shape's median spread, max - min over median: {spreads:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
