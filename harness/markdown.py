"""Markdown pieces the generated pages are made of: tables, numbers as the tables write them,
relative links, generated blocks between markers, and footnotes numbered as they are used.

Text between `<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->` is replaced
by replace_block; nothing else in a file is touched.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

DASH = "–"
SUPERSCRIPTS = "¹²³⁴⁵⁶⁷⁸⁹"


def replace_block(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def num(value: float | None, fmt: str) -> str:
    return DASH if value is None else fmt.format(value)


def span(low: float | None, high: float | None, fmt: str) -> str:
    return DASH if low is None or high is None else f"{fmt.format(low)}–{fmt.format(high)}"


def yes_no(value: bool | None) -> str:
    return DASH if value is None else ("yes" if value else "**no**")


def us(value: float | None) -> str:
    """Microseconds: one decimal below 1,000, thousands separated above."""
    if value is None:
        return DASH
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}"


def seconds(value: float | None) -> str:
    return num(value, "{:.3f}")


def milliseconds(value_s: float | None) -> str:
    """'58.5 ms' from seconds."""
    return DASH if value_s is None else f"{value_s * 1e3:,.1f} ms"


def percent(value: float | None, digits: int = 0) -> str:
    return num(100 * value if value is not None else None, f"{{:.{digits}f}}%")


def count_range(values: Sequence[int | None]) -> str:
    """'3', '1 to 7': the spread of counts (replays, rounds) over a table's rows."""
    known = sorted({v for v in values if v is not None})
    return DASH if not known else (str(known[0]) if len(known) == 1 else f"{known[0]} to {known[-1]}")


def and_list(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def link(target: Path, page: Path) -> str:
    """`target` relative to the folder of `page`, the file that links to it."""
    return os.path.relpath(target, page.parent).replace(os.sep, "/")


class Footnotes:
    """Notes marked ¹, ², ... in the order a table first uses them; the same text keeps its
    mark. `text(lead)` is the paragraph to print under the table ('' when none was used)."""

    def __init__(self) -> None:
        self._notes: list[str] = []

    def mark(self, note: str | None) -> str:
        """The mark of `note` ('' for None), numbering it on first use."""
        if note is None:
            return ""
        if note not in self._notes:
            self._notes.append(note)
        index = self._notes.index(note)
        return SUPERSCRIPTS[index] if index < len(SUPERSCRIPTS) else f"[{index + 1}]"

    def text(self, lead: str = "") -> str:
        """'<lead> ¹ first; ² second.' in one paragraph, or '' where no note was used."""
        if not self._notes:
            return ""
        listed = "; ".join(f"{self.mark(note)} {note}" for note in self._notes)
        return f"{lead} {listed}." if lead else f"{listed}."
