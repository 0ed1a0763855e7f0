"""Writing the generated files (README tables, a report, figures) whole or not at all.

A file written in place is empty or half written from the moment it is opened until the
last byte is on disk: a report stopped by Ctrl-C or a full disk in between would leave a
half README.md behind. Written instead to a temporary file in the same folder and renamed
over the old one (a rename within a folder is atomic), the file holds either its old
content or its new content.
"""
from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` by a file holding `data`, or, if anything fails or stops the write,
    leave it as it was and remove the temporary file. An OSError names `path`."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        # 0o666 less the umask, as open() creates a file; a file replaced keeps its own mode.
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as f:
            if path.exists():
                os.fchmod(f.fileno(), stat.S_IMODE(path.stat().st_mode))
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename, so a crash leaves one or the other
        os.replace(temporary, path)
    except BaseException as err:
        temporary.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno is not None:
            raise OSError(err.errno, err.strerror, str(path)) from err  # not the temporary file's name
        raise
