"""A folder made whole or not at all: what fills it fails, and it is removed."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

from horologe.storage import durable
from horologe.storage.errors import FsyncFailedError

from .manifest import BackupError


@contextlib.contextmanager
def staged(folder: str, what: str) -> Iterator[None]:
    """Run the block that fills ``folder``, its fsyncs offline (storage/durable.py: one that
    fails raises); if it raises, remove ``folder``. An OSError (a full disk, a file in the
    way) or a failed fsync becomes a BackupError that names ``what`` failed."""
    try:
        with durable.offline():
            yield
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise BackupError(f"{what} failed: {e.strerror} ({e.filename}); nothing was kept") from e
    except FsyncFailedError as e:
        shutil.rmtree(folder, ignore_errors=True)
        why = f"writing {e.path} to disk failed: {e.strerror} (errno {e.errno})"
        raise BackupError(f"{what} failed: {why}; nothing was kept") from e
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
