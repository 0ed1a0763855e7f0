"""One decode call of each named backend between cudaProfilerStart and Stop, for Nsight
Compute: what cuDNN's decode kernel is (grid, block, registers, shared memory, its loads)
where it reads the caches faster than any reading of read_floor.py. Run under ncu
(device_call_4.sh):

    ncu --profile-from-start off ... python experiments/d09/cudnn_profile.py --B 32 --L 16384
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backends import arguments, precision, registry  # noqa: E402
from harness.decode_calls import call_decode  # noqa: E402
from harness.decode_inputs import random_decode_inputs  # noqa: E402
from harness.study import GPT2_HEADS  # noqa: E402


def positive(text: str) -> int:
    """--B and --L: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="cudnn_profile.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--B", type=positive, default=32, help="sequences (default: 32)")
    parser.add_argument("--L", type=positive, default=16384, help="cached rows each (default: 16384)")
    parser.add_argument("--backends", type=arguments.text, default="sdpa-cudnn,d09",
                        help="comma-separated (default: sdpa-cudnn,d09)")
    parser.add_argument("--dtype", default=precision.BFLOAT16, choices=precision.EVERY)
    args = parser.parse_args(argv)
    try:
        backends = [registry.get(name) for name in args.backends.split(",")]
    except registry.UnknownBackendError as err:
        parser.error(str(err))
    if not torch.cuda.is_available():
        parser.error("no CUDA device is available: the profile calls each backend on a GPU")
    device = torch.device("cuda")
    x = random_decode_inputs(args.B, GPT2_HEADS, args.L, [args.L] * args.B, seed=0, device=device,
                             dtype=precision.torch_dtype(args.dtype))
    for backend in backends:
        name = backend.name
        fn = backend.timed_decode(device, args.dtype)
        for _ in range(3):  # warm-up: cuDNN picks and loads its engine here
            call_decode(backend, fn, x.q, x.k_cache, x.v_cache, x.lengths, x.host_lengths, GPT2_HEADS)
        torch.cuda.synchronize()
        print(f"profiled call: {name}", flush=True)
        torch.cuda.profiler.start()
        call_decode(backend, fn, x.q, x.k_cache, x.v_cache, x.lengths, x.host_lengths, GPT2_HEADS)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
