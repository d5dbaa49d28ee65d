"""Consumer leases, replicated: which ready-log positions a group has handed out, until when,
and how often.

A pull's leases are committed (in an ``A`` entry's ``leases``: cluster/entries.py) before
it answers, so a new master knows them and hands none of those messages out again before
its lease ends. Per (group, ready topic) one meta value, ``lease/<group>/<topic>``: sorted,
disjoint ``[lo, hi, until_ms, token, pull_id, deliveries]`` runs of positions. ``token``
names the hand-out: the ``until_ms`` it was first leased with, which its receipts carry.
An extend moves ``until_ms`` and keeps the token, so the consumer's receipts stay good; a
later hand-out of the same position takes a later token: the master sets its
``until_ms`` past the token the run holds (node/consumers/service.py), which a release
keeps, since a lease given back may be handed out again before the time it would have
ended (a pull ahead is leased from its message's own time, or a later pull asks a
shorter visibility).
``deliveries`` counts the hand-outs of those positions (1: the first), which a pull's
answer carries with each message (a consumer's hint that another may have had it). A
hand-out whose answer never reached its consumer (lost on the way, or the pull scanned
again: node/consumers/service.py) counts too, as SQS counts a receive.
Trailing fields at their defaults are left off the wire (``pull_id`` "", ``deliveries``
1): a run of an unnamed pull handed out once has four fields, as before pulls had names.

The entry's items, applied in order: ``[group, topic, lo, hi, until_ms]`` leases the
positions (a pull: the token is ``until_ms``), ``[..., until_ms, token]`` extends them,
``until_ms`` 0 gives them back (a release); ``[..., until_ms, token, pull_id]`` is a pull
that named itself, and its runs keep that name, so the pull sent again after its answer
was lost finds them on any master. An extend moves only positions still under its
token: an ack or a release applied before it stands. A position leased under a token
other than its run's is handed out anew: its count goes up by one. An ack or a nack of
a position ends its run. A run whose lease ended (its ``until_ms`` passed, or 0 after a
release) stays, holding nothing but its count and token, until its positions are acked, or leased
again (the count goes on), or the value is written once they are below the ready log's
base (retention took them).

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

import numpy as np

LEASE_PREFIX = "lease/"
APPLIED_CLOCK = "applied_clock_ms"  # meta: the latest clock of the entries applied
# A longer gap between two entries' clocks is time no master served (it writes one at
# least every sync_interval_ms, at most 500 ms: node/config.py): leases do not run then.
SILENCE_MS = 1_000

Lease = tuple[int, int, int, int, str, int]  # lo, hi, until_ms, token, pull_id ("": none), deliveries


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
        self.deliveries = [int(run[5]) if len(run) > 5 else 1 for run in runs]

    def _columns(self) -> tuple[list, ...]:
        return self.lo, self.hi, self.until, self.token, self.pull, self.deliveries

    def __iter__(self) -> Iterator[Lease]:
        return iter(zip(*self._columns(), strict=True))

    def __len__(self) -> int:
        return len(self.lo)

    def _overlapping(self, lo: int, hi: int) -> tuple[int, int]:
        """Runs ``[i, j)`` hold a position ``lo <= o < hi``."""
        return bisect.bisect_right(self.hi, lo), bisect.bisect_left(self.lo, hi)

    def cut(self, lo: int, hi: int) -> None:
        """Forget every run's positions ``lo <= o < hi``."""
        i, j = self._overlapping(lo, hi)
        if i >= j:
            return
        keep = []
        if self.lo[i] < lo:
            keep.append((self.lo[i], lo, *(c[i] for c in self._columns()[2:])))
        if self.hi[j - 1] > hi:
            keep.append((hi, self.hi[j - 1], *(c[j - 1] for c in self._columns()[2:])))
        for k, column in enumerate(self._columns()):
            column[i:j] = [run[k] for run in keep]

    def put(self, lo: int, hi: int, until: int, token: int, pull: str = "") -> None:
        """Lease ``lo <= o < hi`` until ``until`` under ``token``, for the pull named
        ``pull`` ("": unnamed). ``until`` 0 gives them back: each keeps its count and its
        token, and leases nothing. A token other than ``until`` extends: only positions
        whose run has that token, not given back, move (their name and count kept); an
        ack or a release applied before the extend stands. Otherwise a hand-out: a
        position whose run has another token counts one more, one in no run its first."""
        if lo >= hi:
            return
        extend = until > 0 and token != until
        i, j = self._overlapping(lo, hi)
        runs, at = [], lo
        for k in range(i, j):
            start, end = max(lo, self.lo[k]), min(hi, self.hi[k])
            if at < start and until > 0 and not extend:
                runs.append((at, start, until, token, pull, 1))
            was_token, was_pull, count = self.token[k], self.pull[k], self.deliveries[k]
            if until == 0:
                runs.append((start, end, 0, was_token, "", count))
            elif not extend:
                runs.append((start, end, until, token, pull, count + (was_token != token)))
            elif was_token == token and self.until[k] != 0:
                runs.append((start, end, until, token, was_pull, count))
            else:  # another hand-out's: the extend leaves it
                runs.append((start, end, self.until[k], was_token, was_pull, count))
            at = end
        if at < hi and until > 0 and not extend:
            runs.append((at, hi, until, token, pull, 1))
        merged: list[tuple] = []
        for run in runs:  # one run for adjacent positions alike
            if merged and merged[-1][1] == run[0] and merged[-1][2:] == run[2:]:
                merged[-1] = (merged[-1][0], *run[1:])
            else:
                merged.append(run)
        self.cut(lo, hi)
        i = bisect.bisect_left(self.lo, lo)
        for k, column in enumerate(self._columns()):
            column[i:i] = [run[k] for run in merged]

    def of_pull(self, pull: str, now_ms: int) -> list[Lease]:
        """The runs still leased by ``now_ms`` to the pull named ``pull``."""
        return [run for run in self if run[4] == pull and run[2] > now_ms]

    def at(self, offset: int) -> Lease | None:
        """The run holding ``offset``, if any."""
        k = bisect.bisect_right(self.lo, offset) - 1
        if k < 0 or offset >= self.hi[k]:
            return None
        return tuple(column[k] for column in self._columns())

    def deliveries_of(self, offsets: list[int]) -> np.ndarray:
        """How often each of ``offsets`` has been handed out (0: never)."""
        return self._of(offsets, self.deliveries)

    def held_by(self, offsets: list[int], token: int, now_ms: int) -> np.ndarray:
        """Whether each of ``offsets`` is leased under ``token`` past ``now_ms``: one search
        of the runs, as :meth:`_of` (a pull that just committed asks it of all it leased)."""
        if not self.lo:
            return np.zeros(len(offsets), dtype=bool)
        k, held = self._runs_of(offsets)
        tokens, ends = np.asarray(self.token, dtype=np.int64)[k], np.asarray(self.until, dtype=np.int64)[k]
        return held & (tokens == token) & (ends > now_ms)

    def tokens_of(self, offsets: list[int]) -> np.ndarray:
        """The token each of ``offsets`` was last handed out under (0: never): a hand-out
        of them must take a later one (node/consumers/service.py)."""
        return self._of(offsets, self.token)

    def _of(self, offsets: list[int], column: list[int]) -> np.ndarray:
        """``column``'s value for each of ``offsets`` (0: in no run). One search of the
        sorted runs for all of them: a pull asks for up to 1,000, and a lookup each
        (:meth:`at`) cost 1.6 ms of CPU for those (docs/benchmarks.md, "Consume")."""
        if not self.lo:
            return np.zeros(len(offsets), dtype=np.int64)
        k, held = self._runs_of(offsets)
        return np.where(held, np.asarray(column, dtype=np.int64)[k], 0)

    def _runs_of(self, offsets: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``offsets`` (the runs not empty), the run from it down, and whether
        that run holds it."""
        o = np.asarray(offsets, dtype=np.int64)
        lo, hi = np.asarray(self.lo, dtype=np.int64), np.asarray(self.hi, dtype=np.int64)
        k = np.maximum(np.searchsorted(lo, o, side="right") - 1, 0)  # the last run from o down
        return k, (lo[k] <= o) & (o < hi[k])

    def trim(self, base: int) -> None:
        """Forget the positions below ``base``: the ready log no longer holds them."""
        if self.lo and self.lo[0] < base:
            self.cut(self.lo[0], base)

    def pause(self, from_ms: int, gap_ms: int) -> None:
        """Move every lease still running at ``from_ms`` on by ``gap_ms``: no master served
        in between, so none could be extended."""
        self.until = [until + gap_ms if until > from_ms else until for until in self.until]

    def to_wire(self) -> list[list] | None:
        """The meta value (trailing fields at their defaults left off); None (the key
        removed) when no run is left."""
        wire = []
        for run in self:
            n = 6 if run[5] != 1 else 5 if run[4] else 4
            wire.append(list(run[:n]))
        return wire or None
