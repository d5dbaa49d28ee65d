"""This node's Prometheus metrics: one registry, the metric objects, and a collector that
reads the node's state when ``/metrics`` is scraped (prometheus-client writes the text).

Made in ``create_app`` and handed out as narrow callables: the HTTP handlers time
produces, Raft times each apply (on its tick thread), consumers report the lateness of
each pulled batch as one array, and the scrape reads figures through :class:`Sources`.
Label sets stay bounded: past ``cap`` topics or groups, the rest fold into ``other``.
docs/api.md lists every series.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ..observers import Observers
from .gc_pauses import GcPauses

OTHER = "other"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
# Gauges read from /admin/status: name (horologe_<name>) and help.
STATUS_GAUGES = {
    "applied_index": "Raft index applied to storage",
    "commit_index": "Raft commit index this node knows",
    "term": "Raft term this node is in",
    "pending": "messages scheduled and not yet delivered, cancelled, or dropped or dead-lettered late",
    "is_master": "1 on the master",
    "halted": "1 on a node that stopped applying (a full disk, a damaged file: /admin/status says why)",
    "stored": "messages stored",
    "delivered": "messages delivered to ready logs",
    "cancelled": "messages cancelled",
    "rescheduled": "reschedules applied (each files a copy at the new time; pending is unchanged)",
    "late_dropped": "messages dropped for falling due later than their max_lateness (on_late drop)",
    "late_dead_lettered": "messages put in dead-letter queues for falling due later than their max_lateness",
    "raft_log_bytes": "bytes of commands held in the Raft log since the last compaction",
    "clock_offset_seconds": "this node's clock minus the quorum's (docs/cluster.md, Clocks); NaN until known",
    "clock_handovers": "times this node handed the wheel over because its clock strayed",
}
# Labels of horologe_pending_due and their horizons, in the order of Sources.pending_due.
DUE_WITHIN_MS = {"1m": 60_000, "1h": 3_600_000, "1d": 86_400_000}
# Gauges of the last Raft snapshot (/admin/status "snapshot"): name (horologe_snapshot_<name>), help.
SNAPSHOT_GAUGES = {
    "index": "Raft index of the last snapshot this process wrote",
    "seconds": "time the last snapshot took: a checkpoint of the store and a manifest, fsynced",
    "manifest_bytes": "size of the last snapshot file (a manifest of store files, not their data)",
    "store_bytes": "bytes of the store files the last snapshot names: what shipping it to a follower sends",
}


def fold(values: Iterable[tuple[str, float]], cap: int) -> dict[str, float]:
    """The first ``cap`` labels as given, and the sum of the rest under ``other`` (a label
    named ``other`` adds to it too). Callers give a stable order (topic ids, group names),
    so a label once kept stays kept."""
    out: dict[str, float] = {}
    rest = 0.0
    folded = False
    for label, value in values:
        if label in out:
            out[label] += value
        elif len(out) < cap and label != OTHER:
            out[label] = value
        else:
            rest += value
            folded = True
    if folded:
        out[OTHER] = rest
    return out


class BatchHistogram(Collector):
    """A histogram observed a whole array at a time: numpy buckets it, so a pulled batch of
    100k messages costs no Python work per message. Exposed through prometheus-client's
    ``HistogramMetricFamily``."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...]) -> None:
        self._name, self._doc = name, documentation
        self._bounds = np.asarray(buckets, dtype=np.float64)
        self._counts = np.zeros(len(buckets) + 1, dtype=np.int64)  # the last: past every bound
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe_many(self, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        values = np.asarray(values, dtype=np.float64)
        at = np.searchsorted(self._bounds, values, side="left")  # first bound >= value: le
        counts = np.bincount(at, minlength=len(self._counts))
        with self._lock:
            self._counts += counts
            self._sum += float(values.sum())

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            cumulative = np.cumsum(self._counts).tolist()
            total = self._sum
        les = [*(repr(float(b)) for b in self._bounds), "+Inf"]
        yield HistogramMetricFamily(
            self._name, self._doc, buckets=list(zip(les, cumulative, strict=True)), sum_value=total
        )


@dataclass(frozen=True)
class Sources:
    """What a scrape reads; each a callable, bound once the node's service runs."""

    status: Callable[[], dict]  # NodeService.admin_status
    leader_changes: Callable[[], int]
    stale_answers: Callable[[], int]
    pending_by_topic: Callable[[], Mapping[str, int]]
    unacked_by_group: Callable[[], Mapping[str, int]]
    dlq_by_group: Callable[[], Mapping[str, int]]
    pending_due: Callable[[], list[int]]  # pending due within each horizon of DUE_WITHIN_MS
    held: Callable[[], Mapping[str, int]]  # requests the master check held, by how each ended
    loop_lag: Callable[[], dict] | None = None  # LoopLag.figures, when the probe runs


class _NodeCollector(Collector):
    def __init__(self, cap: int) -> None:
        self._cap = cap
        self.sources: Sources | None = None

    def collect(self) -> Iterator:
        src = self.sources
        if src is None:
            return
        st = src.status()
        offset = st["clock_offset_ms"]
        values = {
            "applied_index": st["applied_index"],
            "commit_index": st["commit_index"],
            "term": st["term"],
            "pending": st["pending"],
            "is_master": int(st["role"] == "master"),
            "halted": int(st["halted"] is not None),
            "raft_log_bytes": st["raft_log_bytes"],
            "clock_offset_seconds": float("nan") if offset is None else offset / 1000,
            "clock_handovers": st["clock_handovers"],
            **st["counters"],
        }
        for name, doc in STATUS_GAUGES.items():
            yield GaugeMetricFamily(f"horologe_{name}", doc, value=values[name])
        if st["snapshot"] is not None:
            for name, doc in SNAPSHOT_GAUGES.items():
                yield GaugeMetricFamily(f"horologe_snapshot_{name}", doc, value=st["snapshot"][name])
        due = GaugeMetricFamily(
            "horologe_pending_due",
            "pending messages due within the next minute, hour or day (this node's clock), overdue included",
            labels=["within"],
        )
        for label, value in zip(DUE_WITHIN_MS, src.pending_due(), strict=True):
            due.add_metric([label], value)
        yield due
        yield CounterMetricFamily(
            "horologe_leader_changes",
            "times the leader this node knows changed (a leader lost or a new one heard of)",
            value=src.leader_changes(),
        )
        yield CounterMetricFamily(
            "horologe_raft_stale_answers",
            "followers' answers to appends this node dropped for naming another term than its own",
            value=src.stale_answers(),
        )
        held = CounterMetricFamily(
            "horologe_requests_held",
            "requests a master held while it could not serve for a moment, by how the hold ended",
            labels=["outcome"],
        )
        for outcome, count in src.held().items():
            held.add_metric([outcome], count)
        yield held
        if src.loop_lag is not None:
            lag = src.loop_lag()
            for k, what in (("p99", "p99 of"), ("max", "the largest of")):
                yield GaugeMetricFamily(
                    f"horologe_loop_lag_{k}_seconds",
                    f"{what} how late the event loop ran its loop_lag_probe_ms timer, last 10,000 samples",
                    value=lag[f"{k}_ms"] / 1000,
                )
        yield self._labelled(
            "horologe_pending_by_topic",
            "messages scheduled and not yet delivered or cancelled, per topic",
            "topic",
            src.pending_by_topic(),
        )
        yield self._labelled(
            "horologe_ready_unacked",
            "delivered messages a group has not acked yet, over the ready logs it pulled from",
            "group",
            src.unacked_by_group(),
        )
        yield self._labelled(
            "horologe_dlq_messages", "messages held in a group's dead-letter log", "group", src.dlq_by_group()
        )

    def _labelled(self, name: str, doc: str, label: str, values: Mapping[str, int]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=[label])
        for key, value in fold(values.items(), self._cap).items():
            family.add_metric([key], value)
        return family


class NodeMetrics:
    """The registry and its metrics; components get the bound methods they observe with."""

    def __init__(self, topic_cap: int) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, cpu, fds
        registry = self.registry

        def latency(name: str, doc: str) -> Histogram:
            return Histogram(name, doc, buckets=LATENCY_BUCKETS, registry=registry)

        def lateness(name: str, doc: str) -> BatchHistogram:
            registry.register(histogram := BatchHistogram(name, doc, LATENESS_BUCKETS))
            return histogram

        self.produce_seconds = latency(
            "horologe_produce_seconds",
            "time to answer a produce request (POST /v1/messages and /v1/messages/batch) on the master",
        )
        self.apply_seconds = latency("horologe_apply_seconds", "time to apply one Raft entry to storage")
        self.journal_fsync_seconds = latency(
            "horologe_journal_fsync_seconds",
            "time of one fsync of the Raft journal (before an entry is acknowledged or applied)",
        )
        self.handout_lateness = lateness(
            "horologe_handout_lateness_seconds",
            "how long after its deliver_at a message was handed to a consumer by a pull (each hand-out)",
        )
        self.ready_lateness = lateness(
            "horologe_ready_lateness_seconds",
            "how long after its slot the wheel put a message in its topic's ready log, by the master's clock",
        )
        self._node = _NodeCollector(topic_cap)
        self.registry.register(self._node)
        self.gc_pauses = GcPauses()  # node/main.py installs it: a node process's, not a test's
        self.registry.register(self.gc_pauses)

    def observers(self) -> Observers:
        """The callables the node's parts observe with."""
        return Observers(
            apply_seconds=self.apply_seconds.observe,
            journal_fsync_seconds=self.journal_fsync_seconds.observe,
            ready_lateness=self.ready_lateness.observe_many,
            handout_lateness=self.handout_lateness.observe_many,
        )

    def read_from(self, sources: Sources | None) -> None:
        """Bind the node's figures (None: the node stopped)."""
        self._node.sources = sources

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
