"""Cache files (hour heads, key heads): written whole, through a temp file and ``os.replace``.

No fsync: a cache a crash left stale or empty fails its owner's checks and costs only a
rebuild. Never written in place, so a hard link to one (a snapshot's) keeps its bytes.
Best effort: one that cannot be written (no space or inode left, too many open files) is
logged and left as it was, which costs a rebuild too. It is written as a batch that
committed evicts an hour: an error raised there would fail a batch already applied.
"""

from __future__ import annotations

import contextlib
import logging
import os

log = logging.getLogger(__name__)


def write_cache(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        log.warning("cache %s not written (rebuilt at the next open): %s", path, e)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def read_cache(path: str) -> bytes | None:
    """The file's bytes, or None when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
