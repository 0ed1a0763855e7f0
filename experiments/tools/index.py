"""Writes experiments/INDEX.md: every trial of experiments/, by the version it was tried on,
with what it changes, its outcome and where its notes are; then the shared scripts and
probes. Generated from the files themselves (no GPU):

- a patch's first two lines, before its diff (git apply skips them):
      What: <the change, one line>.
      Outcome: <adopted as vNN | part of vNN | not adopted: why | a measurement: what it showed | not run: why>.
- a script's or probe's first sentence (its docstring or its first comment);
- the notes: the first section of experiments/<folder>/README.md that names the trial.

    python experiments/tools/index.py            # write experiments/INDEX.md
    python experiments/tools/index.py --check    # exit 1 if INDEX.md is not what the files give
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project, when run as a script
from backends import arguments  # noqa: E402

EXPERIMENTS = Path(__file__).resolve().parents[1]
INDEX = EXPERIMENTS / "INDEX.md"
TOOLS = "tools"
NOTES = "README.md"
TRIAL = re.compile(r"^([hvd]\d\d)([a-z]?)_(\d+)_")  # version, chain tag, position
FIELDS = ("What", "Outcome")
SCRIPTS = (".py", ".sh", ".cu")


class UndescribedFile(ValueError):
    """A file the index cannot describe; the message names it and says what it lacks."""


@dataclass(frozen=True)
class Entry:
    path: Path
    name: str  # h04f_1, or a script's file name
    what: str
    outcome: str  # '' for a script
    notes: str  # a relative link to its notes section, or ''


def patch_fields(path: Path) -> dict[str, str]:
    """The What: and Outcome: lines at the head of a patch; UndescribedFile names what is missing."""
    lines = path.read_text(encoding="utf-8").splitlines()[:len(FIELDS)]
    found = {}
    for field, line in zip(FIELDS, lines):
        if not line.startswith(f"{field}: ") or not line[len(field) + 2:].strip():
            raise UndescribedFile(f"{path}: line {FIELDS.index(field) + 1} must be '{field}: <one line>' (before the "
                              "diff; git apply skips it)")
        found[field] = line[len(field) + 2:].strip()
    if len(found) < len(FIELDS):
        raise UndescribedFile(f"{path}: needs its lines {', '.join(f'{f}:' for f in FIELDS)} before the diff")
    return found


def first_sentence(path: Path) -> str:
    """A script's or probe's first sentence: its docstring's (.py) or its first comment's."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        paragraph = (ast.get_docstring(ast.parse(text)) or "").split("\n\n")[0]
    else:
        comment = []
        for line in text.splitlines():
            if line.startswith("#!"):
                continue
            if not line.startswith(("#", "//")):
                break
            body = line.lstrip("#/")
            if not body.strip() or body.startswith("  "):  # a blank line, or an indented table or command
                break
            comment.append(body.strip())
        paragraph = " ".join(comment)
    paragraph = " ".join(paragraph.split())
    if not paragraph:
        raise UndescribedFile(f"{path}: begins with no docstring or comment to describe it")
    match = re.search(r"(?<=[.?])\s|:\s(?=[A-Z`])", paragraph)
    return paragraph[:match.start() + 1].rstrip(":").rstrip() if match else paragraph


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def notes_sections(root: Path = EXPERIMENTS) -> list[tuple[Path, str, str]]:
    """(notes file, section heading, section text) of every experiments/*/README.md, by folder."""
    found = []
    for notes in sorted(root.glob(f"*/{NOTES}"), key=lambda p: folder_rank(p.parent.name)):
        parts = re.split(r"(?m)^#{2,3} (.*)$", notes.read_text(encoding="utf-8"))
        found += [(notes, parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]
    return found


def notes_link(name: str, folder: str, sections: list[tuple[Path, str, str]], root: Path = EXPERIMENTS) -> str:
    """The first notes section that names `name` (a trial, as v16_2 or v16_2_pipeline.patch, or a
    file), its own folder's first, as a link from INDEX.md; '' where none does."""
    pattern = re.compile(rf"(?<![\w/]){re.escape(name)}(?![\w.]*\w)" if "." in name else
                         rf"(?<![\w/]){re.escape(name)}(?!\d)")
    own = [s for s in sections if s[0].parent.name == folder]
    for notes, heading, text in [*own, *(s for s in sections if s[0].parent.name != folder)]:
        if pattern.search(heading) or pattern.search(text):
            return f"[{notes.parent.name}]({notes.relative_to(root).as_posix()}#{anchor(heading)})"
    return ""


def folder_rank(name: str) -> tuple[int, int]:
    """v.. (float32), then h.. (half precision), then d.. (decode), in step order; tools last."""
    match = re.fullmatch(r"([vhd])(\d\d)", name)
    return ("vhd".index(match[1]), int(match[2])) if match else (3, 0)


def entries(root: Path = EXPERIMENTS) -> dict[str, list[Entry]]:
    """Folder -> its entries, each patch and script of experiments/ once."""
    sections = notes_sections(root)
    found: dict[str, list[Entry]] = {}
    stray = [p.name for p in root.iterdir() if p.is_file() and p.name not in (NOTES, INDEX.name)]
    if stray:
        raise UndescribedFile(f"{root}: {', '.join(sorted(stray))} belong in a version's folder or in {TOOLS}/")
    for folder in sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: folder_rank(p.name)):
        listed = []
        for path in sorted(folder.iterdir(), key=lambda p: p.name):
            if path.name == NOTES or path.name.startswith(".") or path.name == "__pycache__":
                continue
            if path.suffix == ".patch":
                match = TRIAL.match(path.name)
                if not match or match[1] != folder.name:
                    raise UndescribedFile(f"{path}: a patch is named vNN[tag]_<position>_<what>.patch and lies in "
                                      "experiments/vNN/")
                fields = patch_fields(path)
                chain = path.name.split("_")[0]
                name = f"{chain}_{match[3]}"
                # a later patch of a chain is often named with its chain ('h04s_1..3'): the first's notes
                notes = notes_link(name, folder.name, sections, root) or notes_link(f"{chain}_1", folder.name,
                                                                                    sections, root)
                listed.append(Entry(path, name, fields["What"], fields["Outcome"], notes))
            elif path.suffix in SCRIPTS:
                listed.append(Entry(path, path.name, first_sentence(path), "",
                                    notes_link(path.name, folder.name, sections, root)))
            else:
                raise UndescribedFile(f"{path}: neither a patch nor a script ({', '.join(SCRIPTS)})")
        found[folder.name] = listed
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(found: dict[str, list[Entry]], root: Path = EXPERIMENTS) -> str:
    trials = sum(1 for f, e in found.items() if f != TOOLS for x in e if x.outcome)
    lines = ["# Experiments: every trial and its outcome", "",
             "<!-- Generated by `python experiments/tools/index.py` from the files: a patch's `What:` and "
             "`Outcome:` lines, a script's first sentence. Edit those, not this file. -->", "",
             f"{trials} trials, by the version each was tried on (a patch against that version's kernel; "
             "`_2` applies on top of `_1` of the same name), then the scripts and probes they share. "
             "[README.md](README.md) says how to run one; a folder's `README.md` holds its notes.", ""]
    for folder, listed in found.items():
        if not listed:
            continue
        if folder == TOOLS:
            lines += [f"## [{TOOLS}/]({TOOLS}/)", "", "| file | what | notes |", "|---|---|---|"]
            lines += [f"| [`{e.name}`]({e.path.relative_to(root).as_posix()}) | {_cell(e.what)} | {e.notes} |"
                      for e in listed]
        else:
            lines += [f"## [{folder}]({folder}/)", "", "| trial | what | outcome | notes |", "|---|---|---|---|"]
            for e in listed:
                lines.append(f"| [`{e.name}`]({e.path.relative_to(root).as_posix()}) | {_cell(e.what)} | "
                             f"{_cell(e.outcome) or '(a script)'} | {e.notes} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(prog="index.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help=f"change nothing; exit 1 if {INDEX.name} is stale")
    args = parser.parse_args(argv)
    try:
        text = render(entries())
    except UndescribedFile as err:
        print(f"index.py: error: {err}", file=sys.stderr)
        return 2
    if args.check:
        if not INDEX.exists() or INDEX.read_text(encoding="utf-8") != text:
            print(f"index.py: {INDEX} is stale: run python experiments/tools/index.py", file=sys.stderr)
            return 1
        return 0
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
