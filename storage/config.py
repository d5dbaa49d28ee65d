"""Storage settings, with the defaults a node runs with.

The settings marked *layout* decide bytes on disk (where a segment ends, which bucket a
key chains in, how long a key lives): every replica must run with the same values, and
a node's TOML does not expose them. Tests change them to reach edge cases with little data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .message import MessageLimits


@dataclass(frozen=True)
class StorageConfig:
    # Every applied batch a sync point (each touched file fsynced, then the journal). Off
    # (the default), a sync point comes every ``sync_every_bytes`` of data or
    # ``sync_every_batches`` batches, whichever is first, before any removal, before every
    # checkpoint record (a Raft dump) and on close; the Raft journal, fsynced before an
    # entry is acknowledged or applied, holds the batches after the last one, and open
    # rolls the store back to it (commit_journal.py). Power loss loses nothing
    # acknowledged either way; on costs an fsync of each file per batch. The batch count
    # bounds what a node applies again after a crash when batches are small: by bytes
    # alone, a node killed after minutes of single produces went back thousands of them.
    fsync: bool = False
    sync_every_bytes: int = 8 * 1024 * 1024
    sync_every_batches: int = 1_000
    limits: MessageLimits = field(default_factory=MessageLimits)
    # Layout: a producer key dedupes and cancels until its message's hour has been
    # delivered for this long (rounded up to whole hours), see key_index.
    key_window_ms: int = 24 * 3600 * 1000
    # Layout: chains of the key index (key_index); its heads take 8 bytes each in memory.
    key_buckets: int = 1 << 22
    # Layout: entries per key-index segment (28 bytes each) and per ready-log segment
    # (40 bytes each); retention and cleaning free space a whole segment at a time.
    key_segment_entries: int = 1 << 22
    ready_segment_entries: int = 1 << 20
    # Layout: a ready segment also closes when a delivery falls in another window of this
    # span (by delivered_at), so retention can remove a quiet topic's old entries.
    ready_segment_span_ms: int = 3_600_000
    # Layout: the key index is cleaned (dead entries dropped, live ones copied to its
    # head) while it holds more than twice its live keys plus this many entries.
    key_clean_slack: int = 1 << 20
    # Hour buckets whose heads (28.8 KB each) stay in memory; beyond this the least
    # recently used is dropped and its heads written to their cache file.
    max_cached_hours: int = 1024
    # Of those, how many keep their three files open; the rest reopen on use.
    max_open_hours: int = 64
    # File descriptors a file table keeps open at most (ready-log segments, key files,
    # hour files), least recently used closed first; closed ones reopen when read.
    max_open_files: int = 256
    # The commit journal is rewritten as one checkpoint once it grew this much past its last
    journal_compact_bytes: int = 4 * 1024 * 1024
    # Records of messages due soon after their production that a reader keeps in memory
    # for the pulls that read them next (recent_records.py); 0 keeps none.
    recent_records_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        assert self.key_buckets > 0 and self.key_buckets & (self.key_buckets - 1) == 0, self.key_buckets
        assert min(self.key_segment_entries, self.ready_segment_entries, self.ready_segment_span_ms) > 0
