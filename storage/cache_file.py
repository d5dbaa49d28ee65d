"""Cache files (hour heads, key heads): written whole, through a temp file and ``os.replace``.

No fsync: a cache a crash left stale or empty fails its owner's checks and costs only a
rebuild. Never written in place, so a hard link to one (a snapshot's) keeps its bytes.
"""

from __future__ import annotations

import os


def write_cache(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_cache(path: str) -> bytes | None:
    """The file's bytes, or None when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
