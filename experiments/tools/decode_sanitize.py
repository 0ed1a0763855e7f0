"""Workload for compute-sanitizer: each decode version's op once on each of the decode gate's
cases (ragged lengths with NaN past each, packed views, S = 1 to 4099), in each dtype asked.

    compute-sanitizer --tool memcheck python experiments/tools/decode_sanitize.py --versions d08
    compute-sanitizer --tool racecheck python experiments/tools/decode_sanitize.py --versions d08 \\
        --dtypes float32,bfloat16 --cases 3

Prints '<version> <dtype> ok' per version and dtype; the sanitizer's summary says the rest.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project

from backends import precision, registry  # noqa: E402
from harness.decode_gate import GATE_CASES  # noqa: E402
from harness.decode_inputs import random_decode_inputs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", default="all", help="comma-separated decode versions (default: all)")
    parser.add_argument("--dtypes", default="float32,bfloat16,float16", help="comma-separated dtypes")
    parser.add_argument("--cases", type=int, default=len(GATE_CASES),
                        help=f"the first N of the gate's {len(GATE_CASES)} cases (default: all)")
    args = parser.parse_args()
    versions = registry.decode_versions()
    if args.versions != "all":
        wanted = args.versions.split(",")
        unknown = sorted(set(wanted) - {v.name for v in versions})
        if unknown:
            parser.error(f"not decode versions: {', '.join(unknown)}")
        versions = [v for v in versions if v.name in wanted]
    if not 1 <= args.cases <= len(GATE_CASES):
        parser.error(f"--cases must be 1 to {len(GATE_CASES)}")
    for version in versions:
        for dtype in args.dtypes.split(","):
            op = version.decode_attention("cuda", dtype)
            for i, spec in enumerate(GATE_CASES[:args.cases]):
                inputs = random_decode_inputs(spec.B, spec.H, spec.S, spec.lengths, seed=i, device="cuda",
                                              dtype=precision.torch_dtype(dtype), layout=spec.layout,
                                              poison_past_length=True)
                out = op(*inputs.args(spec.H))  # (B, C)
                torch.cuda.synchronize()
                if not torch.isfinite(out).all():
                    raise SystemExit(f"{version.name} {dtype} {spec.name}: non-finite output")
            print(f"{version.name} {dtype} ok", flush=True)


if __name__ == "__main__":
    main()
