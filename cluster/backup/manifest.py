"""``backup.json``: what a backup holds, and the check of a backup folder against it.

JSON, one object::

    format            "horologe-backup"
    version           1
    node_id           the node it was taken from
    taken_at_ms       the cluster's clock at the last entry its store applied, or the
                      node's clock as it was sent if earlier (epoch ms): every id
                      acknowledged before it is in the backup (backup_point.taken_at_ms)
    horologe_version  the version that took it
    raft              {"index": the last Raft index applied, "term": the node's term then,
                       "entries": the last applied entry and the one before it, oldest
                       first, each [index, term, command as base64]}
    store_index       the last Raft index the store applied (at or below raft.index: the
                      entries after it are Raft's own, a new leader's no-op)
    files             {"store/<path>": {"bytes": n, "sha256": hex}} for every file

A backup folder holds exactly the files ``files`` names, each of exactly that size and
SHA-256; :func:`check` refuses anything else, naming the first fault.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

import msgspec

FORMAT, VERSION = "horologe-backup", 1
MANIFEST_NAME = "backup.json"
STORE_PREFIX = "store/"


class BackupError(Exception):
    """A backup that cannot be taken, read or restored; the message says why."""


class FileSum(msgspec.Struct, forbid_unknown_fields=True):
    bytes: int
    sha256: str


class RaftPoint(msgspec.Struct, forbid_unknown_fields=True):
    index: int
    term: int
    entries: list[tuple[int, int, bytes]]  # (index, term, command)


class Manifest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    format: str
    version: int
    node_id: str
    taken_at_ms: int
    horologe_version: str
    raft: RaftPoint
    store_index: int
    files: dict[str, FileSum]

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files.values())


def encode(manifest: Manifest) -> bytes:
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


def decode(data: bytes, where: str) -> Manifest:
    try:
        manifest = msgspec.json.decode(data, type=Manifest)
    except msgspec.DecodeError as e:
        raise BackupError(f"{where} is not a Horologe backup manifest: {e}") from e
    if manifest.format != FORMAT:
        raise BackupError(f"{where} is not a Horologe backup manifest (format {manifest.format!r})")
    if manifest.version > VERSION:
        raise BackupError(
            f"{where} is a version {manifest.version} backup; this Horologe reads up to version {VERSION}: "
            "restore it with the version that took it, or a newer one"
        )
    for name in manifest.files:
        if not is_store_path(name):
            raise BackupError(f"{where} names a file outside store/: {name!r}")
    return manifest


def is_store_path(name: str) -> bool:
    """``store/<relative path>``, with no way out of the folder."""
    parts = name.split("/")
    return (
        name.startswith(STORE_PREFIX)
        and len(parts) >= 2
        and all(p not in ("", ".", "..") and "\\" not in p and "\x00" not in p for p in parts)
    )


def read(folder: str) -> Manifest:
    path = os.path.join(folder, MANIFEST_NAME)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise BackupError(f"{folder} is not a Horologe backup: it has no {MANIFEST_NAME}") from None
    except OSError as e:
        raise BackupError(f"cannot read {path}: {e.strerror}") from e
    return decode(data, path)


def check(folder: str, on_bytes: Callable[[int], None] = lambda _n: None) -> Manifest:
    """The manifest of the backup in ``folder``, once every file is checked against it; a
    file that cannot be read (its permissions, an I/O error) is a BackupError naming it."""
    try:
        return _checked(folder, on_bytes)
    except OSError as e:
        raise BackupError(f"cannot read {e.filename or folder}: {e.strerror}") from e


def _checked(folder: str, on_bytes: Callable[[int], None]) -> Manifest:
    manifest = read(folder)
    on_disk = set()
    for root, _dirs, names in os.walk(os.path.join(folder, "store")):
        on_disk.update(os.path.relpath(os.path.join(root, n), folder).replace(os.sep, "/") for n in names)
    extra = sorted(on_disk - set(manifest.files))
    if extra:
        raise BackupError(f"{folder} holds files its manifest does not name: {', '.join(extra[:5])}")
    for name, want in sorted(manifest.files.items()):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise BackupError(f"{path} is missing from the backup")
        size = os.path.getsize(path)
        if size != want.bytes:
            raise BackupError(f"{path} holds {size:,} bytes; the backup's manifest says {want.bytes:,}")
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while data := f.read(1 << 20):
                digest.update(data)
                on_bytes(len(data))
        if digest.hexdigest() != want.sha256:
            raise BackupError(
                f"{path} does not match its SHA-256 in the backup's manifest: the file is corrupt"
            )
    return manifest
