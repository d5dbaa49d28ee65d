"""The soak: one cluster under a mixed load for half an hour, a fault every two minutes.

\b
python -m chaos_tests.soak                              # make soak: 30 min, 15 faults
python -m chaos_tests.soak --minutes 4 --fault-every 60  # a short try

Three real nodes behind toxiproxy, as in the chaos scenarios (n3's clock steppable).
The load is the chaos workload: keyed produces (a fifth of them into hot seconds),
cancels, and two consumers that ack, and nack 2 % of first hand-outs (retry level 1 s)
so that retry copies must come back too. Every ``--fault-every`` seconds one fault is
drawn from the chaos scenarios that need no special start (all but ``clock_skew``,
whose node starts skewed, and ``power_loss``, whose data sits on LazyFS); each kind
comes once before any repeats, in an order the seed sets. Every 5 s the harness reads
each node process's RSS from /proc; faults restart processes, so each process that ran
3 minutes or more is judged over its own life (its last minute against its second).

At the end the load stops, the consumers drain, and the checker's verdicts are taken
over the whole history and every node's ready log. ``<out>/SOAK.md`` has the verdicts,
the faults and RSS per node; ``soak.png`` plots lateness and RSS over time with the
fault windows; ``soak.json`` holds the figures, ``soak.history.json`` what the clients
saw. Exits 1 on any violation or when a node process's RSS grew by more than
``--rss-limit-mb``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

import click

from testkit.process_cluster import CLIENT

from .harness import ChaosCluster
from .history import History
from .run import verdict
from .scenarios import SCENARIOS, Run
from .soak_report import rss_growth, write_report
from .toxiproxy_server import launch
from .workload import Workload

SOAK_TOML = "retry_levels_ms = [1000, 2000]\n"  # a nacked message comes back within the run
NACK_SHARE = 0.02
RSS_EVERY_S = 5.0
PAUSE_EVERY_S = 0.05
PAUSE_REPORTED_MS = 250
CLOCK_SETTLE_MS = 10_000
# Those that run on any cluster, under the soak's own workload (one a scenario's workload
# options or node settings exist for, such as reschedules, would be just its faults here).
FAULTS = {
    name: s
    for name, s in SCENARIOS.items()
    if not s.skew and not s.power_loss and not s.workload and not s.node_toml
}


def fault_plan(rng: random.Random, count: int) -> list[str]:
    """``count`` fault names: every kind once, shuffled, before any repeats."""
    plan: list[str] = []
    while len(plan) < count:
        kinds = sorted(FAULTS)
        rng.shuffle(kinds)
        plan += kinds
    return plan[:count]


class _Periodic(threading.Thread):
    """A daemon thread that calls :meth:`tick` every ``every_s`` until :meth:`stop`."""

    def __init__(self, name: str, every_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self.every_s = every_s
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every_s):
            self.tick()

    def tick(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._done.set()
        self.join(10)


class RssSampler(_Periodic):
    """Samples each node process's resident set every ``every_s``: (true ms, node, pid, bytes)."""

    def __init__(self, cluster: ChaosCluster, every_s: float = RSS_EVERY_S) -> None:
        super().__init__("rss", every_s)
        self.cluster = cluster
        self.samples: list[tuple[int, int, int, int]] = []

    def tick(self) -> None:
        for i, proc in list(self.cluster.procs.items()):
            rss = _rss_bytes(proc.pid)
            if rss is not None:
                self.samples.append((time.time_ns() // 1_000_000, i, proc.pid, rss))


class PauseProbe(_Periodic):
    """The harness's own pauses: it wakes every ``every_s`` and records each wake-up that
    came more than ``reported_ms`` late, as (true ms at the wake-up, ms late). The load and
    the consumers run in this process, so while it is paused (the machine stalled, or one of
    its threads held the GIL) nothing is produced or pulled, whatever the cluster does: a
    stretch without an acknowledged produce that holds such a pause is the harness's."""

    def __init__(self, every_s: float = PAUSE_EVERY_S, reported_ms: float = PAUSE_REPORTED_MS) -> None:
        super().__init__("pause-probe", every_s)
        self.reported_ms = reported_ms
        self.pauses: list[tuple[int, int]] = []
        self._last: float | None = None

    def run(self) -> None:
        self.tick()  # the first period is measured from the start
        super().run()

    def tick(self) -> None:
        self.woke(time.monotonic(), time.time_ns() // 1_000_000)

    def woke(self, now_s: float, true_ms: int) -> None:
        """One wake-up at monotonic ``now_s`` (true time ``true_ms``)."""
        if self._last is not None:
            late_ms = (now_s - self._last - self.every_s) * 1000
            if late_ms > self.reported_ms:
                self.pauses.append((true_ms, round(late_ms)))
        self._last = now_s


def _rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None  # exited (or a zombie, which has no VmRSS)


def soak(seed: int, minutes: float, fault_every_s: float, work: str) -> tuple[dict, list]:
    """Run the soak; returns the checker's result (with the faults and notes) and the RSS samples."""
    toxiproxy = launch(os.path.join(work, "toxiproxy.log"))
    rng = random.Random(seed)
    end_at = time.monotonic() + minutes * 60
    first = fault_every_s / 2  # steady load before the first fault: the RSS baseline
    plan = fault_plan(rng, int((minutes * 60 - first) // fault_every_s) + 1)
    print(f"seed {seed}; {minutes:g} min; faults: {', '.join(plan)}", flush=True)
    cluster = ChaosCluster(os.path.join(work, "soak"), toxiproxy, extra_toml=SOAK_TOML)
    for i in sorted({i for name in plan for i in FAULTS[name].steppable}):
        cluster.steppable(i)
    history = History(seed)
    workload = Workload(cluster.client_urls, CLIENT, history, nack_share=NACK_SHARE)
    run = Run(cluster, workload, history, rng)
    sampler, probe = RssSampler(cluster), PauseProbe()
    began = time.monotonic()
    try:
        probe.start()
        cluster.start_all()
        workload.start()
        sampler.start()
        for k, name in enumerate(plan):
            _sleep_until(began + first + k * fault_every_s, end_at)
            if time.monotonic() >= end_at:
                break
            print(f"{(time.monotonic() - began) / 60:5.1f} min: {name}", flush=True)
            try:
                FAULTS[name].run(run)
                cluster.wait_connected(timeout_s=60)
            except Exception as e:  # noqa: BLE001 - a fault that went wrong is a finding
                run.violations.append(f"{name} did not complete: {type(e).__name__}: {e}")
                run.undo_faults()  # what it left on (links cut, a node stopped) must not outlive it
            print(f"       {len(history.produced)} acknowledged so far", flush=True)
        _sleep_until(end_at, end_at)
        run.drain()
    finally:
        try:
            sampler.stop()
            probe.stop()
        finally:  # the nodes stop even if the sampler would not (a try left three running)
            run.tear_down()
            toxiproxy.stop()
    # A master whose clock steps may fire up to the tolerance early, by the true clock, while
    # it leads: allowed during a clock fault and CLOCK_SETTLE_MS after it, nowhere else.
    allowance = max(FAULTS[name].early_allowance_ms for name in plan)
    windows = [(f["start_ms"], f["end_ms"] + CLOCK_SETTLE_MS) for f in history.faults if "clock" in f["name"]]
    result = verdict(run, began, toxiproxy.kind, allowance, windows, fault_every_s=fault_every_s)
    result["history"] = history
    result["harness_pauses"] = {"over_ms": probe.reported_ms, "pauses": probe.pauses}
    return result, sampler.samples


def _sleep_until(t: float, end_at: float) -> None:
    time.sleep(max(0.0, min(t, end_at) - time.monotonic()))


@click.command(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--minutes", type=click.FloatRange(1, 24 * 60), default=30, show_default=True)
@click.option(
    "--fault-every",
    "fault_every_s",
    type=click.FloatRange(30, 3600),
    default=120,
    show_default=True,
    help="Seconds between the starts of two faults.",
)
@click.option("--seed", type=int, default=None, help="Seed for every random choice. Default: a new one.")
@click.option(
    "--rss-limit-mb",
    type=float,
    default=64,
    show_default=True,
    help="Fail when a node process's RSS grew more than this over its life (3 min or more).",
)
@click.option(
    "--out", default="soak-report", show_default=True, help="Folder for SOAK.md, soak.json, soak.png."
)
@click.option("--keep", is_flag=True, help="Keep the nodes' data folders and logs (printed).")
def main(
    minutes: float, fault_every_s: float, seed: int | None, rss_limit_mb: float, out: str, keep: bool
) -> None:
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    work = tempfile.mkdtemp(prefix="horologe-soak-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        result, samples = soak(seed, minutes, fault_every_s, work)
    finally:
        if keep:
            print(f"data and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    result["rss"] = rss_growth(samples)
    for g in result["rss"]:
        if g["growth_mb"] > rss_limit_mb:
            result["violations"].append(
                f"{g['node']} (pid {g['pid']}) RSS grew {g['growth_mb']:.0f} MB (limit {rss_limit_mb:g})"
            )
    report = write_report(out, result, samples)
    verdict = "pass" if not result["violations"] else "FAIL " + "; ".join(result["violations"])
    print(f"soak: {verdict}; report: {report}", flush=True)
    sys.exit(1 if result["violations"] else 0)


if __name__ == "__main__":
    main()
