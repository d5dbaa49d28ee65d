"""A node's data folder made from a backup: its store, and a Raft dump at the backup's index.

The folder it makes is what a node leaves after a log compaction at the backup's index:
``store/`` (a copy of the backup's, never linked to it), ``raft/snapshot`` (a local dump,
cluster/raft/dump_file.py, naming the backup's last two Raft entries) and
``raft/journal.meta`` with the backup's term, no vote, and its index as committed. The
node starts from there: pysyncobj loads the dump and begins its log with those two
entries. The term matters: a node that started at term 0 with entries of term T in its
log could lead a term below T, and its entries would then lose every comparison of last
terms to older ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from horologe.storage import Storage
from horologe.storage.commit_journal import JOURNAL_NAME

from ..raft.dump_file import LocalDump, write_local
from ..raft.journal import write_meta
from .manifest import BackupError, Manifest, check

RAFT_DIR, STORE_DIR = "raft", "store"
DUMP_NAME, JOURNAL_FILE = "snapshot", "journal"


def restore(backup: str, data_dir: str, on_bytes: Callable[[int], None] = lambda _n: None) -> Manifest:
    """Make ``data_dir`` (missing or empty of a node's data) a node's data folder holding
    exactly what the backup in ``backup`` holds. Every file of the backup is checked
    against its manifest before anything is written."""
    held = [p for p in _node_files(data_dir) if os.path.exists(p)]
    if held:
        raise BackupError(
            f"{data_dir} already holds a node's data ({held[0]}): move it aside, or name an empty folder"
        )
    manifest = check(backup, on_bytes)
    store_dir, raft_dir = os.path.join(data_dir, STORE_DIR), os.path.join(data_dir, RAFT_DIR)
    os.makedirs(raft_dir, exist_ok=True)
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
    return manifest


def _node_files(data_dir: str) -> list[str]:
    raft = os.path.join(data_dir, RAFT_DIR)
    return [
        os.path.join(data_dir, STORE_DIR, JOURNAL_NAME),
        *(os.path.join(raft, name) for name in (JOURNAL_FILE, JOURNAL_FILE + ".meta", DUMP_NAME)),
    ]
