"""Each version's measured effect, the "Measured" block of versions/<folder>/README.md:
the version against its parent on each GPU, and its time over the fastest of PyTorch's
kernels measured in the same run (named), beside the ratio to the registry's kernel
reference of its dtype the benchmark stores (sdpa-efficient in float32, sdpa-cudnn in half
precision; named as such), which the notes' prose quotes. A decode version's block (at the end
of its notes) has its device time and fraction of the copy's rate at DECODE_NOTE_SHAPES."""
from __future__ import annotations

from typing import Callable, Sequence

from backends import precision, registry
from backends.registry import HEAD_DIM, CudaVersion, DecodeVersion
from harness.markdown import DASH, Footnotes, and_list, num, table, us
from harness.reference_text import footnotes, ratio_cells, reference_cell, with_footnotes
from harness.results import DecodeRow, E2ERow, KernelRow, Provenance
from harness.study import DECODE_NOTE_SHAPES, FULL, HEADLINE_TOKENS, VERSION_NOTE_SHAPES, DecodeShape
from harness.tables import GpuResults, dtype_rank, registry_row, stored_ratio

Row = KernelRow | E2ERow


def _primary_dtype(v: registry.Backend) -> str:
    return sorted(v.dtypes, key=dtype_rank)[0]


def _value(row: Row | None) -> float | None:
    if isinstance(row, KernelRow):
        return row.us_device_median
    return row.seconds_gpu_median if row else None


def _change(before: float | None, after: float | None) -> str:
    return DASH if before is None or after is None else f"{100 * (after - before) / before:+.1f}%"


def version_section(r: GpuResults, version: CudaVersion) -> str | None:
    """The version against its parent and PyTorch's fastest kernel on one GPU, in its first
    dtype (bfloat16 for the half-precision track; a second dtype in a last column), or None
    when the GPU has no row of it."""
    dtype = _primary_dtype(version)
    parent = version.parent or registry.TOKENS_REFERENCE
    parent_row = registry_row(parent)
    parent_dtype = dtype if parent_row is None or parent_row.accepts(dtype) else _primary_dtype(parent_row)
    others = [d for d in sorted(version.dtypes, key=dtype_rank)[1:] if r.has(d)]
    if not any(x.backend == version.name for x in [*r.kernels, *r.e2e]):
        return None
    stored = registry.kernel_reference(dtype)

    # (label, what it is in a sentence, the latest row of a backend in a dtype, its row in the
    # run of a provenance, format)
    measures: list[tuple[str, str, Callable[[str, str], Row | None], Callable[[str, str, Provenance], Row | None],
                         str]] = [
        (f"kernel device µs, {s.label()}", f"the {s.label()} kernel", lambda b, d, s=s: r.kernel(b, s, d),
         lambda b, d, p, s=s: r.kernel_in_run(b, s, d, p), "{:.1f}") for s in VERSION_NOTE_SHAPES]
    measures.append((f"{HEADLINE_TOKENS}-token generation, GPU s", f"the {HEADLINE_TOKENS}-token generation",
                     lambda b, d: r.end_to_end(b, HEADLINE_TOKENS, d),
                     lambda b, d, p: r.end_to_end_in_run(b, HEADLINE_TOKENS, d, p), "{:.3f}"))
    notes = Footnotes()
    rows, unpaired, unchanged = [], [], []
    for label, what, get, get_in_run, fmt in measures:
        after = get(version.name, dtype)
        # The parent as the version's run measured it, so that the change compares one run;
        # where that run did not measure the parent, its latest row, and no change.
        same_run_parent = get_in_run(parent, parent_dtype, after.provenance) if after else None
        before = _value(same_run_parent or get(parent, parent_dtype))
        change = _change(_value(same_run_parent), _value(after)) if same_run_parent else DASH
        if isinstance(after, KernelRow):
            ratio, reference = r.kernel_vs_fastest(after)
            own = stored_ratio(after)
        else:
            ratio, reference = r.end_to_end_vs_fastest(after)
            stored_row = r.end_to_end_in_run(stored, HEADLINE_TOKENS, dtype, after.provenance) if after else None
            own = (after.seconds_gpu_median / stored_row.seconds_gpu_median
                   if after and after.seconds_gpu_median and stored_row and stored_row.seconds_gpu_median else None)
        rows.append([label, num(before, fmt), num(_value(after), fmt), change, *ratio_cells(ratio, reference, notes),
                     num(own, "{:.2f}"), *(num(_value(get(version.name, d)), fmt) for d in others)])
        if _value(after) is not None and ratio is None:
            unpaired.append(what)
        if _value(after) is not None and before is not None and same_run_parent is None:
            unchanged.append(what)
    mixed = parent_dtype != dtype
    header = ["measure", f"`{parent}`" + (f" ({parent_dtype})" if mixed else ""),
              f"`{version.name}`" + (f" ({dtype})" if mixed or others else ""), "change",
              f"`{version.name}` / fastest PyTorch", "fastest PyTorch, same run",
              f"`{version.name}` / `{stored}`", *(f"`{version.name}` ({d})" for d in others)]
    in_dtype = f" in {dtype}" if mixed or precision.is_half(dtype) else ""
    same_run = (f"each ratio is to a kernel measured in the same run{in_dtype}: the fastest of PyTorch's kernels "
                f"there (named), and `{stored}`")
    intro = f"On {r.gpu} ({r.provenance_line(None if mixed else dtype)})"
    if mixed:
        intro += (f", `{version.name}` in {dtype} against its parent `{parent}`, a {parent_dtype} version, in "
                  f"{parent_dtype}: the change includes the change of precision; {same_run}")
    elif precision.is_half(dtype):
        intro += f", in {dtype}; {same_run}"
    else:
        intro += f"; {same_run}"
    missing = (f"\n\n`{version.name}` / fastest PyTorch is {DASH} for {and_list(unpaired)}: the run that measured "
               f"`{version.name}`'s timed none of PyTorch's kernels there." if unpaired else "")
    if unchanged:
        missing += (f"\n\nThe change is {DASH} for {and_list(unchanged)}: the run that measured `{version.name}`'s "
                    f"did not measure `{parent}`, whose column shows its latest row.")
    marked = f"\n\n{footnotes(notes)}" if footnotes(notes) else ""
    return intro + ":\n\n" + table(header, rows) + missing + marked


# -- decode versions ---------------------------------------------------------------------------
DECODE_HEADING = "## Measured"  # inside the block: a decode version's notes get it at their end


def _fraction(row: DecodeRow | None) -> str:
    return num(row.fraction_of_hbm if row else None, "{:.2f}")


def _decode_parent(r: GpuResults, parent: str, dtype: str, shape: DecodeShape,
                   own: DecodeRow | None) -> tuple[DecodeRow | None, bool]:
    """The parent's row as the version's run measured it (True), else its latest row (False)."""
    same_run = r.decode_in_run(parent, shape, dtype, own.provenance) if own else None
    return (same_run, True) if same_run else (r.decode_row(parent, shape, dtype), False)


def decode_gpu_section(r: GpuResults, version: DecodeVersion) -> str | None:
    """The version at DECODE_NOTE_SHAPES on one GPU: its device time and fraction of the copy,
    its parent's of the same run, and the fastest of PyTorch's kernels of that run; None where
    the GPU has no decode row of it."""
    if not any(x.backend == version.name for x in r.decode):
        return None
    parent = version.parent
    notes = Footnotes()
    body, elsewhere = [], []
    for dtype, shape in DECODE_NOTE_SHAPES:
        own = r.decode_row(version.name, shape, dtype)
        ratio, reference = r.decode_vs_fastest(own)
        cells = [dtype, shape.label()]
        if parent:
            before, same_run = _decode_parent(r, parent, dtype, shape, own)
            if before and not same_run:
                elsewhere.append(f"{dtype} {shape.label()}")
            change = _change(before.us_device_median, own.us_device_median) if before and own and same_run else DASH
            cells += [us(before.us_device_median if before else None), _fraction(before)]
        cells += [us(own.us_device_median if own else None), _fraction(own), *([change] if parent else []),
                  reference_cell(reference, notes), us(reference.time if reference else None), num(ratio, "{:.2f}")]
        body.append(cells)
    name = f"`{version.name}`"
    header = ["dtype", "shape", *([f"`{parent}` µs", "of the copy"] if parent else []), f"{name} µs", "of the copy",
              *(["change"] if parent else []), "fastest PyTorch, same run", "its µs", f"{name} / fastest PyTorch"]
    rows = [x for x in r.decode if x.backend == version.name]
    text = (f"On {r.gpu} ({r.provenance_line(rows=rows)}): device time per call and the fraction of the copy's rate "
            f"measured in the same run ({_note_shapes_text()}); each ratio to the fastest of PyTorch's kernels of "
            f"{name}'s run at that shape (none at a ragged one: they take it one sequence per call):\n\n"
            + table(header, body))
    if elsewhere:
        text += (f"\n\nThe change is {DASH} at {and_list(elsewhere)}: the run that measured {name}'s did not measure "
                 f"`{parent}`, whose columns show its latest row.")
    return with_footnotes(text, notes)


def _note_shapes_text() -> str:
    """'B sequences of L cached rows, H=12, d=64; B=8 L=16384 ragged: 8 sequences of 512 to 4,096 rows'."""
    shapes = [s for _, s in DECODE_NOTE_SHAPES]
    ragged = [f"{s.label()}: {s.B} sequences of {s.length_range()[0]:,} to {s.length_range()[1]:,} rows"
              for s in dict.fromkeys(shapes) if s.lengths != FULL]
    heads = "/".join(str(h) for h in sorted({s.H for s in shapes}))
    return "; ".join([f"B sequences of L cached rows, H={heads}, d={HEAD_DIM}", *ragged])


def decode_version_section(gpus: Sequence[GpuResults], version: DecodeVersion) -> str:
    """The "Measured" block of a decode version: a table per GPU with its rows, and the GPUs
    that have none."""
    found = {r.gpu: decode_gpu_section(r, version) for r in gpus}
    sections = [s for s in found.values() if s is not None]
    missing = [gpu for gpu, s in found.items() if s is None]
    if missing:
        sections.append(f"{and_list(missing)}: not measured on this GPU yet." if sections else "_Not measured yet._")
    return "\n\n".join([DECODE_HEADING, *sections])
