"""Raft settings for one node, with the values the pysyncobj field notes call for (DESIGN §5)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Peer:
    node_id: str
    raft: str  # the peer's identity: its own Raft address
    http: str
    dial: str | None = None  # where this node connects to it (e.g. a per-link proxy)


@dataclass(frozen=True)
class ClusterSettings:
    node_id: str
    raft: str  # this node's Raft address and identity
    data_dir: str
    # The members it starts with; the replicated membership (membership.py) replaces them
    # once this node has a snapshot or a change of it in its log.
    peers: tuple[Peer, ...] = field(default_factory=tuple)
    http: str = ""  # this node's own HTTP address, as the other members reach it
    # A node that joins a running cluster: it stands for no election until its log holds
    # the change that adds it (``horologe cluster add``).
    join: bool = False
    cluster_secret: str | None = None
    insecure_dev: bool = False
    bind: str | None = None  # listen address when it differs from the identity
    # Failover speed: elections in 0.3-0.6 s; an isolated leader steps down after 2 s.
    raft_min_timeout: float = 0.3
    raft_max_timeout: float = 0.6
    leader_fallback_timeout: float = 2.0
    heartbeat_s: float = 0.05  # pysyncobj requires raft_min_timeout > 3 x heartbeat
    # The tick thread's wait for a message while work goes on over ticks (entries to apply,
    # a catch-up, a transfer: RaftNode._tick_wait). With nothing under way it waits until
    # its next timed step (a heartbeat, its election deadline), at most ``idle_tick_s``.
    # Looking at the election deadline on a fixed grid split votes: at pysyncobj's 50 ms,
    # both followers woke together on the master's heartbeats, stood in the same 50 ms step
    # after its loss (11 of 30 kills), and the cluster waited a second election timeout
    # (failover 0.9-1.1 s instead of 0.3-0.5). A wait that ends at the deadline has no grid.
    # Twice idle_tick_s is what a follower's stop counts for at most (awake_clock.py): it
    # must stay well under raft_min_timeout.
    tick_s: float = 0.005
    idle_tick_s: float = 0.05
    # How soon after an apply a leader sends its new commit index, unless a proposal's
    # append (sent at once) carried it sooner; None: a tick (``tick_s``). pysyncobj sends it
    # at once (0), in an append of its own after every apply: two appends, two follower
    # wake-ups and two answers more per sequential produce (docs/cluster.md, pysyncobj
    # settings).
    commit_told_within_s: float | None = None
    # A refused connect answers at once on a LAN, so retrying often costs one SYN. At
    # pysyncobj's 5 s a link that missed its peer's start stayed down for seconds, and a
    # release could pick a master that a follower could not hear (docs/cluster.md).
    connect_retry_s: float = 0.2
    # pysyncobj drops a link on the first send after 3.5 s without reading from it, and
    # two followers exchange nothing: the new master's first message after a release
    # killed the link it needed. A keep-alive on every link keeps each side reading.
    link_keepalive_s: float = 0.5
    # Must be >= 4x the largest command, or big commands crawl (field notes).
    append_batch_bytes: int = 4 * 1024 * 1024
    # A snapshot hard-links the store's files (O(files)), so compaction is cheap. The log
    # it cuts is on disk (journal.py): its size is the journal file and what a
    # restart replays. It compacts at whichever comes first: this many entries, this much
    # time, or ``log_compaction_bytes`` of commands in the log (docs/cluster.md, Memory).
    log_compaction_min_entries: int = 50_000
    log_compaction_min_time: float = 600.0
    log_compaction_bytes: int = 64 * 1024 * 1024
    # A snapshot shipment's bytes per message (snapshot_stream.py).
    ship_chunk_bytes: int = 512 * 1024
    proposal_timeout_s: float = 5.0
    hold_back_s: float = 2.0  # after a forced release, no election from the old master
