"""Development probe for the half-precision track (GPU): check versions against float64 and
the vendor kernels' errors at awkward shapes, then time them beside cuDNN, FlashAttention-2
and sdpa-efficient in one process. Nothing goes to results/.

    python experiments/tools/half_probe.py h01 [--dtypes bfloat16,float16] [--shapes headline|all]

Errors: relative Frobenius error and max abs error against float64 computed from the same
16-bit inputs; beside them the better of sdpa-flash and sdpa-cudnn on those inputs, and the
ratio (ours / vendor). Times: device time (CUDA-graph replays with L2 flushes,
harness/device_timing.py), median, in microseconds.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project

from backends import arguments, precision, registry  # noqa: E402
from harness.device_timing import DeviceTimer  # noqa: E402
from harness.reference import compare, random_qkv, reference_attention  # noqa: E402
from harness.study import Shape  # noqa: E402

VENDORS = ("sdpa-flash", "sdpa-cudnn")
CHECK_SHAPES = [(1, 1), (1, 2), (1, 17), (1, 63), (1, 64), (1, 65), (3, 129), (2, 513), (1, 1000), (2, 2047),
                (1, 4097)]
TIME_SHAPES = {"headline": [(1, 512), (8, 4096)],
               "all": [(1, 64), (1, 128), (1, 256), (1, 512), (1, 1024), (1, 2048), (1, 4096), (8, 1024), (8, 2048),
                       (8, 4096)]}
TIMED_BASELINES = ("sdpa-cudnn", "sdpa-flash", "sdpa-efficient")


def inputs(B: int, T: int, dtype: torch.dtype, *, seed: int, strided: bool = False):
    shape = Shape(B, 12, T)
    if strided:  # the three views of a packed (B, T, 3C) projection
        g = torch.Generator("cuda").manual_seed(seed)
        qkv = torch.randn(B, T, 3 * shape.C, device="cuda", generator=g).to(dtype)
        return qkv.split(shape.C, dim=-1)
    return tuple(t.to(dtype) for t in random_qkv(shape, seed=seed, device="cuda"))


def check(names: list[str], dtype_name: str) -> bool:
    dtype = precision.torch_dtype(dtype_name)
    fns = {n: registry.get(n).attention("cuda", dtype_name) for n in (*VENDORS, *names)}
    ok = True
    print(f"\n{dtype_name}: error vs float64 (rel / max abs), ratio to the better vendor kernel")
    cases = [(B, T, False) for B, T in CHECK_SHAPES] + [(3, 129, True)]
    for B, T, strided in cases:
        q, k, v = inputs(B, T, dtype, seed=B * 7919 + T, strided=strided)
        ref = reference_attention(q, k, v, 12)
        vendor = []
        for n in VENDORS:  # cuDNN refuses T = 1
            try:
                vendor.append(compare(fns[n](q, k, v, 12), ref))
            except RuntimeError:
                pass
        best_rel = min((c.rel_err for c in vendor), default=0.0)
        best_abs = min((c.max_abs_err for c in vendor), default=0.0)
        parts = []
        for n in names:
            out = torch.full_like(q, float("nan"), memory_format=torch.contiguous_format)
            del out  # poison the block the op's output will reuse
            c = compare(fns[n](q, k, v, 12), ref)
            bad = c.nonfinite or c.rel_err > 1.25 * best_rel + 1e-6 or c.max_abs_err > 1.25 * best_abs + 1e-5
            ok &= not bad
            parts.append(f"{n} {c.rel_err:.2e}/{c.max_abs_err:.2e} ({c.rel_err / max(best_rel, 1e-12):.2f}x)"
                         + (" FAIL" if bad else ""))
        label = f"B={B} T={T}" + (" strided" if strided else "")
        print(f"  {label:18s} vendor {best_rel:.2e}/{best_abs:.2e}  " + "  ".join(parts))
    return ok


def time_all(names: list[str], dtype_name: str, shapes: list[tuple[int, int]]) -> None:
    dtype = precision.torch_dtype(dtype_name)
    timer = DeviceTimer(torch.device("cuda"))
    backends = [*TIMED_BASELINES, *names]
    fns = {n: registry.get(n).attention("cuda", dtype_name) for n in backends}
    print(f"\n{dtype_name}: device time, us (ratio to sdpa-cudnn)")
    print(f"  {'shape':14s}" + "".join(f"{n:>22s}" for n in backends))
    for B, T in shapes:
        q, k, v = inputs(B, T, dtype, seed=T)
        times = {n: timer.time(lambda fn=fns[n]: fn(q, k, v, 12)).us_device_median for n in backends}
        ref = times["sdpa-cudnn"]
        tflops = Shape(B, 12, T).flops() / 1e6
        print(f"  B={B} T={T:<8d}" + "".join(
            f"{times[n]:>10.1f} ({times[n] / ref:4.2f}) {tflops / times[n]:4.0f}T" for n in backends))


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="half_probe.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="+", type=arguments.text, help="half-precision versions, e.g. h01 h02")
    parser.add_argument("--dtypes", type=arguments.text, default="bfloat16,float16")
    parser.add_argument("--shapes", choices=tuple(TIME_SHAPES), default="all")
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args(argv)
    try:
        dtypes = precision.select(args.dtypes)
        versions = [registry.get(name) for name in args.names]
    except (precision.UnknownDtypeError, registry.UnknownBackendError) as err:
        parser.error(str(err))
    if not torch.cuda.is_available():
        parser.error(f"no CUDA device is available: the probe checks and times {', '.join(v.name for v in versions)} "
                     "on a GPU")
    warnings.filterwarnings("ignore", message=".*(kernel not used|runtime disabled|does not support).*")
    ok = True
    for dtype_name in dtypes:
        if not args.no_check:
            ok &= check(args.names, dtype_name)
        time_all(args.names, dtype_name, TIME_SHAPES[args.shapes])
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
