"""A node's data folder made from a backup: its store, and a Raft dump at the backup's index.

The folder it makes is what a node leaves after a log compaction at the backup's index:
``store/`` (a copy of the backup's, never linked to it), ``raft/snapshot`` (a local dump,
cluster/raft/dump_file.py, naming the backup's last two Raft entries) and
``raft/journal.meta`` with the backup's term, no vote, and its index as committed. The
node starts from there: pysyncobj loads the dump and begins its log with those two
entries. The term matters: a node that started at term 0 with entries of term T in its
log could lead a term below T, and its entries would then lose every comparison of last
terms to older ones.

Both are made in ``<data_dir>/.restoring`` and moved into place once whole, ``raft/`` first
and ``store/`` second, ``data_dir`` fsynced after each move: a restore that fails (a full
disk) moves back what it moved and removes the stage, leaving nothing a node or the next
restore would take for its data.

A kill (or a power loss) between the two moves leaves ``raft/`` in place and the store in
the stage. That order is the safe one: a node started on a store without its Raft files
would begin an empty Raft log while its store says it applied up to the backup's index,
and take the entries of a new history at those indexes for ones it holds. A dump without
its store is refused instead: the node opens an empty store, finds it behind the dump
(``StoreBehindDumpError``) and halts, saying so. The next restore into that folder takes
it for what it is (``raft/`` holding only what a restore writes, the stage holding a store
and ``data_dir`` none) and removes both before it begins; once a node was started there,
it made files of its own, and the folder is refused like any node's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable

from horologe.storage import Storage, durable
from horologe.storage.commit_journal import JOURNAL_NAME
from horologe.storage.durable import fsync_dir
from horologe.storage.errors import FsyncFailedError

from ..raft.dump_file import LocalDump, write_local
from ..raft.journal import write_meta
from .manifest import BackupError, Manifest, check
from .staging import staged

RAFT_DIR, STORE_DIR, STAGE_DIR = "raft", "store", ".restoring"
DUMP_NAME, JOURNAL_FILE = "snapshot", "journal"


def restore(backup: str, data_dir: str, on_bytes: Callable[[int], None] = lambda _n: None) -> Manifest:
    """Make ``data_dir`` (missing or empty of a node's data) a node's data folder holding
    exactly what the backup in ``backup`` holds. Every file of the backup is checked
    against its manifest before anything is written. On a failure nothing is left in
    ``data_dir`` and BackupError says why."""
    stage = os.path.join(data_dir, STAGE_DIR)
    # What a restore stopped between its moves left: replaced, once the backup is checked.
    left = [os.path.join(data_dir, RAFT_DIR)] if _stopped_between_moves(data_dir, stage) else []
    held = [p for p in _node_files(data_dir) if os.path.exists(p) and os.path.dirname(p) not in left]
    held += [p for p in _targets(data_dir) if os.path.lexists(p) and not _empty_dir(p) and p not in left]
    if held:
        raise BackupError(
            f"{data_dir} already holds a node's data ({held[0]}): move it aside, or name an empty folder"
        )
    manifest = check(backup, on_bytes)
    for path in [*left, stage]:  # a restore that stopped midway
        shutil.rmtree(path, ignore_errors=True)
    with staged(stage, f"restoring into {data_dir}"):
        _make(backup, manifest, stage)
        _move_in(stage, data_dir)  # each move on disk before the next
        os.rmdir(stage)
    # The empty stage's removal, not yet on disk for sure: a restore left so is whole (each
    # move was), and a next restore removes a stage it finds.
    with durable.offline(), contextlib.suppress(FsyncFailedError):
        fsync_dir(data_dir)
    return manifest


def _move_in(stage: str, data_dir: str) -> None:
    """Move what ``stage`` holds into ``data_dir`` in the order of :func:`_targets`, each
    move durable before the next; if one fails, what was moved goes back into ``stage``."""
    moved: list[str] = []
    try:
        for target in _targets(data_dir):
            os.replace(os.path.join(stage, os.path.basename(target)), target)
            moved.append(target)
            fsync_dir(data_dir)
    except BaseException:
        for target in reversed(moved):
            os.replace(target, os.path.join(stage, os.path.basename(target)))
        raise


def _stopped_between_moves(data_dir: str, stage: str) -> bool:
    """Whether ``data_dir`` is what a restore stopped between its moves left: its stage
    holds the store, ``data_dir`` none (no ``store/``, or an empty one), and ``raft/`` what
    a restore writes there, no more (a node started there would have made its store and
    its Raft journal)."""
    raft, store = os.path.join(data_dir, RAFT_DIR), os.path.join(data_dir, STORE_DIR)
    return (
        os.path.isdir(os.path.join(stage, STORE_DIR))
        and (not os.path.lexists(store) or _empty_dir(store))
        and os.path.isdir(raft)
        and not os.path.islink(raft)
        and set(os.listdir(raft)) == {DUMP_NAME, JOURNAL_FILE + ".meta"}
    )


def _make(backup: str, manifest: Manifest, data_dir: str) -> None:
    """The store and Raft files of the (checked) backup in a new ``data_dir``."""
    store_dir, raft_dir = os.path.join(data_dir, STORE_DIR), os.path.join(data_dir, RAFT_DIR)
    os.makedirs(raft_dir)
    with Storage(store_dir) as store:
        store.restore(os.path.join(backup, STORE_DIR), link_sealed=False)
        if store.applied_index != manifest.store_index:
            raise BackupError(
                f"the store in {backup} is at Raft index {store.applied_index}; "
                f"its manifest says {manifest.store_index}"
            )
        checkpoint = store.checkpoint_record()
    (i0, t0, c0), (i1, t1, c1) = manifest.raft.entries
    raft_data = ((c1, i1, t1), (c0, i0, t0), set())  # pysyncobj's: (last applied, the one before, cluster)
    tmp = os.path.join(raft_dir, DUMP_NAME + ".tmp")
    write_local(tmp, LocalDump(i1, raft_data, checkpoint))
    os.replace(tmp, os.path.join(raft_dir, DUMP_NAME))
    write_meta(
        os.path.join(raft_dir, JOURNAL_FILE + ".meta"),
        {"currentTerm": manifest.raft.term, "votedForNodeId": None, "raftCommitIndex": i1},
    )


def _targets(data_dir: str) -> list[str]:
    """Where a restore puts what it made, in the order it moves them there: the Raft files,
    then the store (the module's docstring says why)."""
    return [os.path.join(data_dir, RAFT_DIR), os.path.join(data_dir, STORE_DIR)]


def _empty_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path)


def _node_files(data_dir: str) -> list[str]:
    raft = os.path.join(data_dir, RAFT_DIR)
    return [
        os.path.join(data_dir, STORE_DIR, JOURNAL_NAME),
        *(os.path.join(raft, name) for name in (JOURNAL_FILE, JOURNAL_FILE + ".meta", DUMP_NAME)),
    ]
