"""The time a node's tick thread ran through, by which it judges how long its leader has
been silent (``RaftNode._withholds_vote``).

A node stopped for longer than the election timeout (SIGSTOP, a starved CPU, a slow
fsync, a step of its clock) heard nothing meanwhile because it did not run, not because
its leader fell silent; what waited on its links is read when it runs again, in no set
order. Judged by its monotonic clock, it would grant a vote or pre-vote read before the
leader's append waiting beside it, and a member cut off from the leader would be elected
while the leader's lease holds on the others (or depose a leader for nothing). etcd's
raft counts elapsed ticks of the node's own loop instead: a stop is one tick.

This clock is that: it moves with the monotonic clock between two ticks, by at most
``longest_step`` (twice the tick thread's longest wait), and a tick makes the time read
then its new base. It reads no more than the monotonic time passed, so a follower that
withholds its vote for an election timeout of it withholds it for at least that long,
which the read lease relies on (docs/cluster.md, "A deposed master stops at once").
"""

from __future__ import annotations


class AwakeClock:
    def __init__(self, now: float, longest_step: float) -> None:
        self._base = now  # the time this clock read at the last tick
        self._at = now  # the monotonic time of the last tick
        self._longest = longest_step

    def read(self, now: float) -> float:
        """The time ran through, at monotonic ``now``: it starts at the monotonic time of
        the clock's creation, and falls behind by what stops took beyond a step."""
        return self._base + min(max(now - self._at, 0.0), self._longest)

    def tick(self, now: float) -> None:
        """A tick of the node runs at monotonic ``now``."""
        self._base = self.read(now)
        self._at = max(self._at, now)
