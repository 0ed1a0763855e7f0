"""How the generated tables name what a ratio divides by: the fastest of PyTorch's kernels
measured in the same run at the same shape (tables.Reference), named in the row, with a
footnote where that run timed only some of them."""
from __future__ import annotations

from typing import Iterable

from harness.markdown import DASH, Footnotes, num
from harness.tables import Reference, baselines, name_ranges

RATIO_COLUMN = "time / fastest PyTorch"
REFERENCE_COLUMN = "fastest PyTorch, same run"


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _or(names: tuple[str, ...]) -> str:
    """'`a`', '`a` or `b`', '`a`, `b` or `c`'."""
    quoted = [f"`{name}`" for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def ratio_rule(what: str = "time", at: str = "shape") -> str:
    """The sentence that says what every ratio of a table is."""
    return (f"{RATIO_COLUMN}: the {what} over that of the fastest of PyTorch's kernels ({_quoted(baselines())}) "
            f"measured in the same run (same GPU, driver, CUDA, torch and commit) at the same {at}, named beside "
            f"it: below 1 is faster")


MISSING_LEAD = "Marked: the fastest of the PyTorch kernels that run timed there, which were not all of them:"


def missing_note(reference: Reference) -> str | None:
    """The footnote of a reference whose run timed only some of PyTorch's kernels ('not
    `naive` or `sdpa-math`'), under MISSING_LEAD."""
    if not reference.missing:
        return None
    return f"not {_or(reference.missing)}"


def footnotes(notes: Footnotes) -> str:
    """The paragraph under a table whose references have footnotes ('' where none has)."""
    return notes.text(MISSING_LEAD)


def with_footnotes(text: str, notes: Footnotes) -> str:
    """`text` and, where its references have footnotes, their paragraph under it."""
    return text + (f"\n\n{footnotes(notes)}" if footnotes(notes) else "")


def reference_cell(reference: Reference | None, notes: Footnotes) -> str:
    """'`flex-attention`', '`sdpa-efficient`¹' (a footnote: what that run did not time), or a dash."""
    if reference is None:
        return DASH
    return f"`{reference.backend}`{notes.mark(missing_note(reference))}"


def ratio_cells(ratio: float | None, reference: Reference | None, notes: Footnotes) -> list[str]:
    return [num(ratio, "{:.2f}"), reference_cell(reference, notes)]


def unpaired(names: Iterable[str], column: str = RATIO_COLUMN) -> str:
    """The sentence for the rows shown with a dash for a ratio because their run timed none of
    PyTorch's kernels there ('' where there are none)."""
    found = list(names)
    if not found:
        return ""
    return (f" {column} is {DASH} for {name_ranges(found)}: the run that measured it timed none of PyTorch's "
            f"kernels there.")
