"""What the command lines (`python -m gpt2`, `python -m harness`) share: a parser whose errors
are one line and that refuses an option given twice, argument types that refuse an empty value
(an empty path would mean the current folder, an empty list every backend), and a check of a
number's range."""
from __future__ import annotations

import argparse
import sys
import typing
from pathlib import Path
from typing import NoReturn, Sequence


_GIVEN = "_options_given"  # the namespace's record of the options given so far, removed after parsing


class _Once(argparse._StoreAction):
    """argparse's 'store' for an option that takes a value, refused when the command line gives it
    twice (argparse would keep the last value without a word: `--results-dir a --results-dir b`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if self.option_strings:
            given = vars(namespace).setdefault(_GIVEN, set())
            if self.dest in given:
                parser.error(f"argument {'/'.join(self.option_strings)}: given twice "
                             f"({str(getattr(namespace, self.dest))!r}, then {str(values)!r}): give it once")
            given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class OneLineParser(argparse.ArgumentParser):
    """argparse with one line on stderr for a bad command line (its usage is a --help away);
    exit status 2, as argparse's. An option that takes a value may be given once."""

    def __init__(self, *args: typing.Any, **kwargs: typing.Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        vars(parsed).pop(_GIVEN, None)
        return parsed, extras

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
