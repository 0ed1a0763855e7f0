"""A warp's fixed issue stalls in a kernel's SASS (no GPU): ptxas writes into every
instruction's control bits how many cycles the warp waits before its next instruction (the
"wait" stall reason of ncu). Their sum over a stretch of code is the least time one warp
takes to issue it, before any wait on a scoreboard, a barrier or another warp.

    cuobjdump -sass attention.cubin > attention.sass
    python experiments/tools/sass_stalls.py attention.sass --function causal_attention_kernel \\
        --dtype bf16

By default it reports each consumer softmax of the three-consumer kernels: the code between
a wait for all but one wgmma group (S complete) and the next wait for all (P V complete),
each region once; --from and --to give other delimiters.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/")
CONTROL_WORD = re.compile(r"^\s+/\* (0x[0-9a-f]{16}) \*/")


@dataclass(frozen=True)
class Instruction:
    address: int
    text: str
    stall: int  # cycles before this warp's next instruction (control bits 105-108)

    @property
    def opcode(self) -> str:
        words = self.text.split()
        return words[1] if words[0].startswith("@") else words[0]


def read_function(path: Path, function: str, dtype: str | None) -> list[Instruction]:
    """The instructions of the first function whose name contains `function` (and, given a
    dtype, its instantiation's mangled type: bf16 -> __nv_bfloat16, f16 -> __half)."""
    type_names = {"bf16": "nv_bfloat16", "f16": "6__half", None: ""}
    lines = path.read_text(errors="replace").splitlines()
    start = None
    for number, line in enumerate(lines):
        if "Function :" in line and function in line and type_names[dtype] in line:
            start = number
            break
    if start is None:
        raise SystemExit(f"{path}: no function matching {function!r} ({dtype or 'any type'})")
    code: list[Instruction] = []
    for number in range(start + 1, len(lines) - 1):
        if "Function :" in lines[number]:
            break
        match = INSTRUCTION.match(lines[number])
        control = CONTROL_WORD.match(lines[number + 1])
        if match and control:
            high = int(control.group(1), 16)
            code.append(Instruction(int(match.group(1), 16), match.group(2), (high >> 41) & 0xF))
    return code


def regions(code: list[Instruction], begin: str, end: str) -> list[list[Instruction]]:
    """Each stretch from an instruction containing `begin` to the next containing `end`."""
    found, current = [], None
    for instruction in code:
        if begin in instruction.text:
            current = []
        elif current is not None and end in instruction.text:
            found.append(current)
            current = None
        elif current is not None:
            current.append(instruction)
    return found


def variants(region: list[Instruction]) -> list[list[Instruction]]:
    """The region cut after each unconditional branch: a softmax per mask, each ending in a
    branch to the join."""
    parts, current = [], []
    for instruction in region:
        current.append(instruction)
        if instruction.opcode == "BRA" and not instruction.text.startswith("@"):
            parts.append(current)
            current = []
    parts.append(current)
    return [part for part in parts if part]


def report(region: list[Instruction], label: str) -> None:
    by_opcode: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for instruction in region:
        by_opcode[instruction.opcode][0] += 1
        by_opcode[instruction.opcode][1] += instruction.stall
    total = sum(i.stall for i in region)
    print(f"{label}: {len(region)} instructions, {total} cycles of fixed stalls")
    for opcode, (count, stall) in sorted(by_opcode.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"    {opcode:28s} {count:4d} instructions {stall:5d} cycles")


def main(argv: Sequence[str] | None = None) -> None:
    parser = arguments.OneLineParser(prog="sass_stalls.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("sass", type=arguments.path, help="output of cuobjdump -sass")
    parser.add_argument("--function", type=arguments.text, default="causal_attention_kernel",
                        help="a part of the kernel's (mangled) name")
    parser.add_argument("--dtype", choices=("bf16", "f16"), default=None,
                        help="the instantiation (default: the first match)")
    parser.add_argument("--from", dest="begin", type=arguments.text, default="WARPGROUP.DEPBAR.LE gsb0, 0x1",
                        help="text of the instruction that opens a region")
    parser.add_argument("--to", dest="end", type=arguments.text, default="WARPGROUP.DEPBAR.LE gsb0, 0x0",
                        help="text of the instruction that closes it")
    args = parser.parse_args(argv)
    if not args.sass.is_file():
        parser.error(f"{args.sass} is a folder, not a file" if args.sass.is_dir() else f"{args.sass}: no such file")
    code = read_function(args.sass, args.function, args.dtype)
    found = regions(code, args.begin, args.end)
    if not found:
        raise SystemExit(f"no region from {args.begin!r} to {args.end!r}")
    for region in found:
        for part in variants(region):
            report(part, f"{part[0].address:#06x}-{part[-1].address:#06x}")


if __name__ == "__main__":
    main()
