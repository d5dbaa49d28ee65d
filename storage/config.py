"""Storage settings, with the defaults a node runs with."""

from __future__ import annotations

from dataclasses import dataclass, field

from .message import MessageLimits


@dataclass(frozen=True)
class StorageConfig:
    # Group commit: one fsync of each touched file, then of the journal, per applied
    # batch. Off trades durability on power loss for throughput (see docs/benchmarks.md).
    fsync: bool = True
    limits: MessageLimits = field(default_factory=MessageLimits)
    key_window_ms: int = 24 * 3600 * 1000
    max_keys: int = 1_000_000
    # Hour buckets whose heads (28.8 KB each) stay in memory; beyond this the least
    # recently used is dropped and its heads written to their cache file.
    max_cached_hours: int = 1024
    # Of those, how many keep their three files open; the rest reopen on use.
    max_open_hours: int = 64
    journal_compact_bytes: int = 4 * 1024 * 1024
