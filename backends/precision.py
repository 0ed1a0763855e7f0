"""The study's precisions: float32 and the two half-precision types, each named once.

A backend's registry row lists the dtypes it accepts; results rows carry the dtype they
were measured in, by these names.
"""
from __future__ import annotations

import torch

from backends import arguments

FLOAT32 = "float32"
BFLOAT16 = "bfloat16"
FLOAT16 = "float16"

# name -> torch dtype, in the order sweeps, tables and figures use
DTYPES: dict[str, torch.dtype] = {FLOAT32: torch.float32, BFLOAT16: torch.bfloat16, FLOAT16: torch.float16}
HALF: tuple[str, ...] = (BFLOAT16, FLOAT16)  # 16-bit in and out, float32 accumulation
EVERY: tuple[str, ...] = tuple(DTYPES)


class UnknownDtypeError(ValueError):
    """A dtype name the study does not measure."""


def torch_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise UnknownDtypeError(f"unknown dtype {name!r}; the study measures {', '.join(DTYPES)}") from None


def dtype_name(dtype: torch.dtype) -> str:
    """torch.bfloat16 -> 'bfloat16'; a dtype the study does not measure raises UnknownDtypeError."""
    for name, value in DTYPES.items():
        if value == dtype:
            return name
    raise UnknownDtypeError(f"dtype {dtype} is not one the study measures ({', '.join(DTYPES)})")


def select(spec: str | None) -> list[str]:
    """Dtypes named in a comma-separated list ('float32,bfloat16'), or all of them for None/'all',
    in the study's order; a list that names none ('') is refused, not taken for all, and so is
    one that names a dtype twice."""
    if spec is None or spec.strip() == "all":
        return list(EVERY)
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if not names:  # '' or ',': never 'every dtype'
        raise UnknownDtypeError(f"{spec!r} names no dtype: give comma-separated names among {', '.join(EVERY)}, or "
                                "'all'")
    for name in names:
        torch_dtype(name)
    repeated = arguments.repeated(names)
    if repeated:
        raise UnknownDtypeError(f"{spec!r} names {', '.join(repeated)} more than once: name each dtype once")
    return [name for name in EVERY if name in names]


def is_half(name: str) -> bool:
    return name in HALF
