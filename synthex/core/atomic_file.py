"""One way to replace a small file whole: write a temporary file beside it, then rename it over.

A reader (or a process killed mid-write) sees the old content or the new, never half of either. The
temporary name carries the pid and a random part, so two processes writing the same file never share
one; it ends in ``.tmp`` so cleanup that globs for leftovers finds it. ``fsync=True`` also syncs the data
before the rename (for files whose loss after a power cut would lose work: journals, ledgers); cursors
and caches that are rebuilt from their sources skip it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_file_atomic(path: Path, content: str | bytes, *, fsync: bool = False, mode: int | None = None) -> None:
    """Replace ``path`` with ``content`` (text is written as UTF-8) in one rename; ``mode`` sets the
    file's permission bits from its first byte (e.g. ``0o600`` for a file holding purged text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
