"""Consumer leases, replicated: which ready-log positions a group has handed out, until when.

A pull's leases are committed (in an ``A`` entry's ``leases``: cluster/entries.py) before
it answers, so a new master knows them and hands none of those messages out again before
its lease ends. Per (group, ready topic) one meta value, ``lease/<group>/<topic>``: sorted,
disjoint ``[lo, hi, until_ms, token]`` runs of positions. ``token`` names the hand-out:
the ``until_ms`` it was first leased with, which its receipts carry. An extend moves
``until_ms`` and keeps the token, so the consumer's receipts stay good; a later hand-out of
the same position comes after the lease ended, so its token is later.

The entry's items, applied in order: ``[group, topic, lo, hi, until_ms]`` leases the
positions (a pull: the token is ``until_ms``), ``[..., until_ms, token]`` extends them,
``until_ms`` 0 gives them back (a release); ``[..., until_ms, token, pull_id]`` is a pull
that named itself, and its runs keep that name (a fifth column), so the pull sent again
after its answer was lost finds them on any master. An ack or a nack of a position ends its lease.
Runs whose ``until_ms`` has passed by the entry's clock are dropped whenever the value is
written, so it holds only what consumers may still hold.

A lease's time does not run while no master serves: between the last entry of one term and
the first entry of the next, no consumer could extend it; nor between two entries of one
term whose clocks lie more than ``SILENCE_MS`` apart (a master writes one at least every
``sync_interval_ms``, so it was stopped, or its clock held at the last quorum time while
the readings of a majority were stale: it served nothing then). Such an entry, the first
of a term or the first after a silence, moves every lease still running at the clock of
the last entry before it on by the gap between the two clocks (``LeaseTable.pause``),
keeping its token, so each has the time it had left when the master fell silent. A lease
ends later, never earlier: its message waits at most that long more, and a consumer whose
renewals found no master keeps what it holds. The master judges its leases by the same
clock, the latest entry's it applied, or its own if that is behind
(node/consumers/service.py): its own may already be past a silence whose entry has not
applied yet. A gap arises too when entries take over a second to commit, or a majority's
clocks step forward: leases then run slower, never faster.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

LEASE_PREFIX = "lease/"
APPLIED_CLOCK = "applied_clock_ms"  # meta: the latest clock of the entries applied
# A longer gap between two entries' clocks is time no master served (it writes one at
# least every sync_interval_ms, at most 500 ms: node/config.py): leases do not run then.
SILENCE_MS = 1_000

Lease = tuple[int, int, int, int, str]  # lo, hi, until_ms, token, pull_id ("": none)


def lease_key(group: str, topic: str) -> str:
    return f"{LEASE_PREFIX}{group}/{topic}"


def lease_item(item) -> tuple[str, str, int, int, int, int, str]:
    """An entry's lease item as (group, topic, lo, hi, until_ms, token, pull_id)."""
    group, topic, lo, hi, until = item[:5]
    token = item[5] if len(item) > 5 else until
    pull = item[6] if len(item) > 6 else ""
    return str(group), str(topic), int(lo), int(hi), int(until), int(token), str(pull)


class LeaseTable:
    """The leases of one (group, ready topic), as parallel sorted columns (mutable: an
    apply builds the next value in it)."""

    def __init__(self, wire=None) -> None:
        self._hold(wire or ())

    def _hold(self, runs) -> None:
        runs = [tuple(run) for run in runs]
        self.lo = [int(run[0]) for run in runs]
        self.hi = [int(run[1]) for run in runs]
        self.until = [int(run[2]) for run in runs]
        self.token = [int(run[3]) for run in runs]
        self.pull = [str(run[4]) if len(run) > 4 else "" for run in runs]

    def __iter__(self) -> Iterator[Lease]:
        return iter(zip(self.lo, self.hi, self.until, self.token, self.pull, strict=True))

    def __len__(self) -> int:
        return len(self.lo)

    def cut(self, lo: int, hi: int) -> None:
        """End every lease of positions ``lo <= o < hi``."""
        i = bisect.bisect_right(self.hi, lo)  # the first run ending after lo
        j = bisect.bisect_left(self.lo, hi)  # runs [i, j) start before hi: they overlap
        if i >= j:
            return
        keep = []
        if self.lo[i] < lo:
            keep.append((self.lo[i], lo, self.until[i], self.token[i], self.pull[i]))
        if self.hi[j - 1] > hi:
            keep.append((hi, self.hi[j - 1], self.until[j - 1], self.token[j - 1], self.pull[j - 1]))
        columns = (self.lo, self.hi, self.until, self.token, self.pull)
        for k, column in enumerate(columns):
            column[i:j] = [run[k] for run in keep]

    def put(self, lo: int, hi: int, until: int, token: int, pull: str = "") -> None:
        """Lease ``lo <= o < hi`` until ``until`` (0: give them back) under ``token``, for
        the pull named ``pull`` ("": unnamed, or an extend)."""
        self.cut(lo, hi)
        if until > 0 and lo < hi:
            i = bisect.bisect_left(self.lo, lo)
            columns = (self.lo, self.hi, self.until, self.token, self.pull)
            for column, value in zip(columns, (lo, hi, until, token, pull), strict=True):
                column.insert(i, value)

    def of_pull(self, pull: str, now_ms: int) -> list[Lease]:
        """The runs still leased by ``now_ms`` to the pull named ``pull``."""
        return [run for run in self if run[4] == pull and run[2] > now_ms]

    def expire(self, now_ms: int) -> None:
        """Drop the leases that ended by ``now_ms``."""
        live = [run for run in self if run[2] > now_ms]
        if len(live) < len(self):
            self._hold(live)

    def pause(self, from_ms: int, gap_ms: int) -> None:
        """Move every lease still running at ``from_ms`` on by ``gap_ms``: no master served
        in between, so none could be extended."""
        self.until = [until + gap_ms if until > from_ms else until for until in self.until]

    def to_wire(self) -> list[list] | None:
        """The meta value; None (the key removed) when nothing is leased. A run of an
        unnamed pull has four fields, as before pulls had names."""
        return [list(run) if run[4] else list(run[:4]) for run in self] or None
