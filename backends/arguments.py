"""What the command lines (`python -m gpt2`, `python -m harness`) share: a parser whose errors
are one line, argument types that refuse an empty value (an empty path would mean the
current folder, an empty list every backend), and a check of a number's range."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn, Sequence


class OneLineParser(argparse.ArgumentParser):
    """argparse with one line on stderr for a bad command line (its usage is a --help away);
    exit status 2, as argparse's."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def text(value: str) -> str:
    """A value that must say something: an empty one is refused, not taken as 'all'."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty value: name something, or leave the option out for its default")
    return value


def path(value: str) -> Path:
    """A path that must name something: '' would be the current folder."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty path: name a file or folder, or leave the option out for its "
                                         "default")
    return Path(value)


def repeated(names: Sequence[str]) -> list[str]:
    """The names that `names` holds more than once, each once, in the order they first appear
    (a list of backends, dtypes, architectures, variants or columns that must name each once)."""
    return sorted({name for name in names if names.count(name) > 1}, key=names.index)


def out_of_range(name: str, value: int, low: int, high: int, why: str) -> str | None:
    """Why `value` of option `name` is refused (None if low <= value <= high): 'at least' or
    'at most', with `why` the upper bound is what it is."""
    if value < low:
        return f"{name} must be at least {low} (got {value})"
    if value > high:
        return f"{name} must be at most {high} (got {value}): {why}"
    return None
