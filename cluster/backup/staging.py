"""A folder made whole or not at all: what fills it fails, and it is removed."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

from .manifest import BackupError


@contextlib.contextmanager
def staged(folder: str, what: str) -> Iterator[None]:
    """Run the block that fills ``folder``; if it raises, remove ``folder``. An OSError
    (a full disk, a file in the way) becomes a BackupError that names ``what`` failed."""
    try:
        yield
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise BackupError(f"{what} failed: {e.strerror} ({e.filename}); nothing was kept") from e
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
