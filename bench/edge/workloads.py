"""The workloads, each run the same way on either system (issue #11's table).

A workload gets a started system and a ``Scale`` and returns its figures as
``{name: value}`` plus raw samples for the plots. Everything is bounded in count and
time; a workload that cannot finish in time raises rather than report a partial figure.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .costs import BUSIEST_CPU, SERVER_CPU, Costs
from .procs import written_bytes

BODY = b"x" * 200
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Scale:
    """Message counts; ``quick`` divides them by 10 for a smoke run."""

    ingest: int = 200_000
    single: int = 1_000
    lateness_rate: int = 2_000
    lateness_s: int = 10
    hot: int = 100_000
    consume: int = 200_000
    memory_steps: tuple[int, ...] = (10_000, 1_000_000, 3_000_000)
    restart_steps: tuple[int, ...] = (100_000, 3_000_000)
    sustained_s: int = 300
    forecast_pending: int = 10_000_000
    forecast_calls: int = 20
    reschedule: int = 200_000
    idle_s: int = 20
    backup_pending: int = 1_000_000

    def quick(self) -> Scale:
        steps = (10_000, 100_000)
        counts = (20_000, 200, 500, 5, 10_000, 20_000, steps, steps, 30, 100_000, 5, 20_000)
        return Scale(*counts, idle_s=5, backup_pending=100_000)

    def big(self) -> Scale:
        return Scale(memory_steps=(*self.memory_steps, 10_000_000), restart_steps=(100_000, 10_000_000))


def now_ms() -> float:
    return time.time() * 1000


def pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def _run_threads(n: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            target(k)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _load(
    system, total: int, deliver_at: Callable[[int], int], producers: int = 2, ids: list | None = None
) -> list[float]:
    """Store ``total`` messages in batches of 1,000; the batch latencies (ms). With ``ids``
    (a list of ``total``), message ``i``'s id goes to ``ids[i]``."""
    latencies: list[float] = []
    per = -(-total // producers)

    def produce(k: int) -> None:
        p = system.producer()
        start = k * per
        for lo in range(start, min(total, start + per), 1000):
            hi = min(total, start + per, lo + 1000)
            items = [(deliver_at(i), BODY) for i in range(lo, hi)]
            t0 = time.perf_counter()
            if ids is not None:
                ids[lo:hi] = p.batch_ids(items)
            elif p.batch(items) != len(items):
                raise RuntimeError("a batch was not fully acknowledged")
            latencies.append((time.perf_counter() - t0) * 1000)

    _run_threads(producers, produce)
    return latencies


def _receive(system, consumers: int, expected: int, timeout_s: float) -> list[tuple[float, int]]:
    """Consume until ``expected`` messages arrived; (received ms, deliver_at ms) of each."""
    got: list[tuple[float, int]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + timeout_s

    def consume(_k: int) -> None:
        c = system.consumer()
        try:
            while time.monotonic() < deadline:
                with lock:
                    if len(got) >= expected:
                        return
                at, delivers = c.receive(0.5)
                with lock:
                    got.extend((at, d) for d in delivers)
        finally:
            c.close()

    _run_threads(consumers, consume)
    if len(got) < expected:
        raise TimeoutError(f"{len(got)} of {expected} messages received in {timeout_s:.0f} s")
    return got


def ingest(system, scale: Scale) -> dict:
    out = {}
    for producers in (1, 2):
        t0 = time.perf_counter()
        lat = _load(system, scale.ingest, lambda _i: int(now_ms()) + DAY_MS, producers)
        rate = scale.ingest / (time.perf_counter() - t0)
        out[f"{producers} producer(s): acked msg/s"] = rate
        out[f"{producers} producer(s): batch p50 ms"] = pct(lat, 50)
        out[f"{producers} producer(s): batch p99 ms"] = pct(lat, 99)
    return out


def single(system, scale: Scale) -> dict:
    p = system.producer()
    lat = []
    for _ in range(scale.single):
        t0 = time.perf_counter()
        p.one((int(now_ms()) + DAY_MS, BODY))
        lat.append((time.perf_counter() - t0) * 1000)
    return {"p50 ms": pct(lat, 50), "p99 ms": pct(lat, 99), "max ms": max(lat)}


def lateness(system, scale: Scale) -> dict:
    n = scale.lateness_rate * scale.lateness_s
    t0 = int(now_ms()) + 6_000  # ingest is done well before the first falls due
    _load(system, n, lambda i: t0 + i * 1000 // scale.lateness_rate)
    if now_ms() >= t0:
        raise RuntimeError("loading took longer than the lead before the first deliver time")
    got = _receive(system, 1, n, scale.lateness_s + 60)
    late = [at - d for at, d in got]
    return {
        "received lateness p50 ms": pct(late, 50),
        "received lateness p99 ms": pct(late, 99),
        "received lateness max ms": max(late),
        "received early (count)": sum(1 for x in late if x < 0),
        "_samples": late,
    }


def hot(system, scale: Scale) -> dict:
    out = {}
    for consumers in (1, 2):
        due = int(now_ms()) + 15_000
        _load(system, scale.hot, lambda _i, due=due: due)
        if now_ms() >= due:
            raise RuntimeError("loading took longer than the lead before the hot millisecond")
        got = _receive(system, consumers, scale.hot, 120)
        late = [at - d for at, d in got]
        out[f"{consumers} consumer(s): last received after ms"] = max(late)
        out[f"{consumers} consumer(s): received p50 ms"] = pct(late, 50)
    return out


def consume(system, scale: Scale) -> dict:
    _load(system, scale.consume, lambda _i: int(now_ms()) - 1_000)
    t0 = now_ms()
    got = _receive(system, 4, scale.consume, 300)
    return {"4 consumers: msg/s end to end": scale.consume / ((max(at for at, _ in got) - t0) / 1000)}


def sustained(system, scale: Scale) -> dict:
    """Two producers as fast as they are acknowledged (batches of 1,000, due at once) and
    one consumer draining, for ``sustained_s``: the rates held, and for Horologe how often
    the master changed meanwhile (each new term is an election). The consumer keeps the
    peer's memory bounded over minutes of ingest."""
    deadline = time.monotonic() + scale.sustained_s
    terms = getattr(system, "terms", None)
    before = terms() if terms else None
    counts = {"acked": 0, "received": 0}
    lock = threading.Lock()
    t0 = time.perf_counter()

    def work(k: int) -> None:
        if k == 2:
            c = system.consumer()
            try:
                while time.monotonic() < deadline:
                    _at, got = c.receive(0.5)
                    with lock:
                        counts["received"] += len(got)
            finally:
                c.close()
            return
        p = system.producer()
        while time.monotonic() < deadline:
            n = p.batch([(int(now_ms()), BODY) for _ in range(1000)])
            with lock:
                counts["acked"] += n

    _run_threads(3, work)
    took = time.perf_counter() - t0
    out = {
        f"{scale.sustained_s} s, 2 producers: acked msg/s": counts["acked"] / took,
        f"{scale.sustained_s} s, 1 consumer: received msg/s": counts["received"] / took,
    }
    if before is not None:
        out[f"{scale.sustained_s} s: master changes (count)"] = max(terms()) - max(before)
    return out


def idle(system, scale: Scale) -> dict:
    """Nothing asked of the system for ``idle_s``: the CPU its servers spend keeping
    themselves going (for Horologe: the wheel's sync entries, heartbeats, probes), and
    what they write to disk meanwhile."""
    pids = system.server_pids()
    written = {n: written_bytes(p) for n, p in pids.items()}
    costs = Costs(system)
    costs.start()
    t0 = time.monotonic()
    time.sleep(scale.idle_s)
    wall = time.monotonic() - t0
    spent = costs.figures()
    wrote = {n: written_bytes(p) - written[n] for n, p in pids.items()}
    return {
        "all server processes: % of a core": spent[SERVER_CPU] / wall * 100,
        "busiest server process: % of a core": spent[BUSIEST_CPU] / wall * 100,
        "all server processes: KB written to disk a second": sum(wrote.values()) / 1024 / wall,
    }


def memory(system, scale: Scale) -> dict:
    """RSS of each process as pending grows (deliver times spread over 30 days)."""

    def worst() -> tuple[int, dict]:
        time.sleep(3)  # let background work (snapshots, AOF rewrite) settle before reading
        mem = system.memory()
        return max(rss for rss, _ in mem.values()), mem

    base, _ = worst()
    out: dict = {"_samples": [(0, base)]}
    stored = 0
    start = int(now_ms()) + 60_000
    for target in scale.memory_steps:
        _load(system, target - stored, lambda i, s=stored: start + (s + i) * 7919 % (30 * DAY_MS))
        stored = target
        rss, mem = worst()
        out["_samples"].append((stored, rss))
        out[f"{stored:,} pending: largest process RSS MB"] = rss / 1024
        out[f"{stored:,} pending: bytes per pending"] = (rss - base) * 1024 / stored
        out[f"{stored:,} pending: peak RSS MB"] = max(hwm for _, hwm in mem.values()) / 1024
    return out


def _until_serving(producer, item: tuple[int, bytes], deadline: float) -> None:
    """Until a batch of ``item`` is acknowledged (a restarted or restored system)."""
    while True:
        try:
            if producer.batch([item]):
                return
        except Exception:  # noqa: BLE001 - not serving yet: refused, loading, no master
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def restart(system, scale: Scale) -> dict:
    """Stop every server, start them again on their data: seconds until a producer's batch
    is acknowledged again (for Redis, by the replica too), at two sizes of backlog."""
    out: dict = {}
    stored = 0
    start = int(now_ms()) + 60_000
    producer = system.producer()
    for target in scale.restart_steps:
        _load(system, target - stored, lambda i, s=stored: start + (s + i) * 7919 % (30 * DAY_MS))
        stored = target
        time.sleep(3)
        began = time.monotonic()
        system.restart()
        _until_serving(producer, (start, BODY), began + 900)
        stored += 1
        out[f"{target:,} pending: restart to serving s"] = time.monotonic() - began
    first, last = scale.restart_steps[0], scale.restart_steps[-1]
    out[f"restart at {last:,} ÷ at {first:,}"] = (
        out[f"{last:,} pending: restart to serving s"] / out[f"{first:,} pending: restart to serving s"]
    )
    return out


def forecast(system, scale: Scale) -> dict:
    """Pending spread over 30 days; then counts per hour over those 30 days (720 buckets),
    and per minute over the next day (1,440), each asked ``forecast_calls`` times. The
    peer counts with one pipelined ZCOUNT per bucket. Both answers must agree."""
    start = (int(now_ms()) // 3_600_000 + 1) * 3_600_000
    _load(system, scale.forecast_pending, lambda i: start + i * 7919 % (30 * DAY_MS))
    out = {}
    for label, bucket_ms, buckets in (("1h x 720", 3_600_000, 720), ("1m x 1,440", 60_000, 1_440)):
        lat, counts = [], None
        for _ in range(scale.forecast_calls):
            t0 = time.perf_counter()
            counts = system.forecast(start, bucket_ms, buckets)
            lat.append((time.perf_counter() - t0) * 1000)
        if label.startswith("1h") and sum(counts) != scale.forecast_pending:
            raise RuntimeError(f"the forecast counts {sum(counts)} of {scale.forecast_pending} pending")
        out[f"{scale.forecast_pending:,} pending, {label}: call p50 ms"] = pct(lat, 50)
        out[f"{scale.forecast_pending:,} pending, {label}: call max ms"] = max(lat)
    return out


RESCHEDULE_BATCH = 1000
NEAR_EVERY = 100  # one move in this many goes into the near future, to be received
NEAR_LEAD_MS = 20_000  # ... this long after its batch is sent
STATUS_SAMPLE = 500


def reschedule(system, scale: Scale) -> dict:
    """Pending spread over a day (from 10 minutes ahead), then every one of them moved, in
    batches of 1,000 from 2 clients (the timed part): reschedules acknowledged per second.
    Most move to another time of that day; one in ``NEAR_EVERY`` to ``NEAR_LEAD_MS`` after
    its batch is sent. Then, untimed: a sample's status must show its new time, and the
    near ones must each be received once, carrying their new time, never before it."""
    n = scale.reschedule
    start = int(now_ms()) + 600_000  # none falls due while the moves run, however slow
    ids: list = [None] * n
    _load(system, n, lambda i: start + i * 7919 % DAY_MS, ids=ids)
    far = (start + np.random.default_rng(15).integers(0, DAY_MS, n)).tolist()
    moved_to: dict[str, int] = {}
    latencies: list[float] = []
    per = -(-n // 2)

    def move(k: int) -> None:
        r = system.rescheduler()
        for lo in range(k * per, min(n, (k + 1) * per), RESCHEDULE_BATCH):
            hi = min(n, (k + 1) * per, lo + RESCHEDULE_BATCH)
            near = int(now_ms()) + NEAR_LEAD_MS
            moves = [(ids[i], near + i % 1000 if i % NEAR_EVERY == 0 else far[i]) for i in range(lo, hi)]
            t0 = time.perf_counter()
            if r.batch(moves) != len(moves):
                raise RuntimeError("a reschedule batch was not fully acknowledged")
            latencies.append((time.perf_counter() - t0) * 1000)
            moved_to.update(moves)

    t0 = time.perf_counter()
    _run_threads(2, move)
    rate = n / (time.perf_counter() - t0)

    r = system.rescheduler()
    sample = [ids[i] for i in range(1, n, max(1, n // STATUS_SAMPLE)) if i % NEAR_EVERY]
    wrong = [(mid, r.deliver_at(mid), moved_to[mid]) for mid in sample]
    wrong = [w for w in wrong if w[1] != w[2]]
    if wrong:
        raise RuntimeError(f"{len(wrong)} of {len(sample)} statuses lack the new time, e.g. {wrong[0]}")
    near = {ids[i]: moved_to[ids[i]] for i in range(0, n, NEAR_EVERY)}
    got = _receive_ids(system, near, (max(near.values()) - now_ms()) / 1000 + 60)
    return {
        "2 clients, batches of 1,000: rescheduled msg/s": rate,
        "2 clients: batch p50 ms": pct(latencies, 50),
        "2 clients: batch p99 ms": pct(latencies, 99),
        "status sampled, showing the new time (count)": len(sample),
        "moved near: received once at the new time (count)": len(got),
        "_samples": latencies,
    }


def _receive_ids(system, expected: dict[str, int], timeout_s: float) -> dict[str, float]:
    """Consume until every message of ``expected`` (id -> its deliver time) arrived, once,
    with that deliver time, not before it; when each was received (ms). Raises otherwise."""
    got: dict[str, float] = {}
    c = system.consumer()
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < len(expected) and time.monotonic() < deadline:
            at, delivers = c.receive_ids(0.5)
            for mid, deliver_at in delivers:
                if mid in got or expected.get(mid) != deliver_at or at < deliver_at:
                    why = "twice" if mid in got else "early" if at < deliver_at else "at another time"
                    raise RuntimeError(f"{mid} received {why}: at {at:.0f}, due {deliver_at}")
                got[mid] = at
    finally:
        c.close()
    if len(got) < len(expected):
        raise TimeoutError(f"{len(got)} of {len(expected)} moved messages received in {timeout_s:.0f} s")
    return got


def backup(system, scale: Scale) -> dict:
    """A backup of ``backup_pending`` pending (spread over 30 days) taken from a follower
    (for Redis, the replica) while a producer sends one message at a time: how long it
    took, and the produce p99 during it against the p99 in the 5 s before and after, in
    the same run. Then every server restored from it: seconds until a batch is acknowledged."""
    start = int(now_ms()) + 60_000
    _load(system, scale.backup_pending, lambda i: start + i * 7919 % (30 * DAY_MS))
    time.sleep(3)
    producer = system.producer()
    done = threading.Event()

    def singles(until: Callable[[], bool]) -> list[float]:
        lat = []
        while not until() or len(lat) < 20:
            t0 = time.perf_counter()
            producer.one((start, BODY))
            lat.append((time.perf_counter() - t0) * 1000)
        return lat

    def for_s(seconds: float) -> Callable[[], bool]:
        deadline = time.monotonic() + seconds
        return lambda: time.monotonic() > deadline

    dest = system.root + "-backup"
    shutil.rmtree(dest, ignore_errors=True)
    taken: dict = {}

    def take() -> None:
        began = time.monotonic()
        try:
            taken["bytes"] = system.backup(dest)
            taken["s"] = time.monotonic() - began
        finally:
            done.set()

    before = singles(for_s(5))
    thread = threading.Thread(target=take)
    thread.start()
    during = singles(done.is_set)
    thread.join()
    if "s" not in taken:
        raise RuntimeError("the backup failed")
    after = singles(for_s(5))
    quiet = pct(before + after, 99)
    began = time.monotonic()
    try:
        system.restore(dest)
        _until_serving(producer, (start, BODY), began + 900)
        restored = time.monotonic() - began
        held = sum(system.forecast(start - DAY_MS, DAY_MS, 32))
        if held < scale.backup_pending + len(before):
            raise RuntimeError(f"the restored system holds {held:,} pending; the backup was taken past more")
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return {
        f"{scale.backup_pending:,} pending: backup s": taken["s"],
        f"{scale.backup_pending:,} pending: backup MB": taken["bytes"] / 1e6,
        "single produce p99 ms, no backup running": quiet,
        "single produce p99 ms, during the backup": pct(during, 99),
        "single produce p99 during ÷ without (same run)": pct(during, 99) / quiet,
        "restore from the backup to serving s": restored,
    }


WORKLOADS = {
    "ingest": ingest,
    "single": single,
    "lateness": lateness,
    "hot": hot,
    "consume": consume,
    "memory": memory,
    "idle": idle,
    "restart": restart,
    "sustained": sustained,
    "forecast": forecast,
    "reschedule": reschedule,
    "backup": backup,
}
