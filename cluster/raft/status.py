"""This node's Raft state as the event loop sees it: a frozen :class:`RaftStatus` that the
tick thread publishes through the crossing (cluster/raft/loop_crossing.py) whenever it
changes, so the loop never reads pysyncobj's members, which the tick thread writes.

A status also rides along with every applied entry (``Applied``), so the loop never knows
an applied index past the commit index it was told. Between applies, the figures that
change with every entry (the commit index, the log's bytes) are posted with any other
change, or at most every :data:`FIGURES_EVERY_S`: they feed status pages and metrics,
never a decision.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from .dump_file import DumpFigures
from .membership import Member
from .peer_clocks import PeerClock

FIGURES_EVERY_S = 0.05


class Role(StrEnum):
    MASTER = "master"
    CANDIDATE = "candidate"
    FOLLOWER = "follower"  # read "slave" as this too, for one release (horologe.client.node_role)


class RaftStatus(NamedTuple):
    role: Role
    term: int
    leader: str | None  # the leader's Raft address, as this node knows it
    linked: frozenset[str]  # Raft addresses of the peers with a live, handshaken link
    shipping: frozenset[str]  # a leader: Raft addresses of the peers it ships a snapshot to
    peer_clocks: tuple[PeerClock, ...]  # each peer's keep-alives heard, with its last reading taken
    leader_changes: int  # changes of the leader this node knew of, since it started
    stale_answers: int  # followers' answers dropped for naming another term
    last_dump: DumpFigures | None  # the last snapshot this process wrote
    lease_until: float  # a leader: until when (monotonic s) it may serve (RaftNode._lease_until)
    members: tuple[Member, ...]  # the membership in this node's log, itself first (membership.py)
    members_settled: bool  # no change of it in the log above the commit index: none may be undone
    commit_index: int
    log_bytes: int  # commands held in the Raft log

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER

    def decisive(self) -> tuple:
        """What a change of publishes at once (all but the running figures)."""
        return self[:-2]

    def clock_readings(self, now: float) -> list[tuple[int, float]]:
        """Each peer's reading: (ms, seconds since the peer read it) at monotonic ``now``."""
        return [(c.ms, c.age_s(now)) for c in self.peer_clocks if c.ms is not None]


STARTING = RaftStatus(Role.FOLLOWER, 0, None, frozenset(), frozenset(), (), 0, 0, None, 0.0, (), True, 0, 0)
