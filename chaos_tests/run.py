"""Run chaos scenarios against a fresh 3-node cluster each, and write the report.

\b
python -m chaos_tests.run                      # every scenario (make chaos)
python -m chaos_tests.run --quick              # the make-test subset
python -m chaos_tests.run -s sigkill_master -s clock_skew --seed 7
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sys
import tempfile
import time

import click
import numpy as np

from horologe.storage import MessageId, StorageError, check_store
from horologe.storage.ready_log import READY
from testkit.process_cluster import CLIENT

from .checker import check, violations
from .harness import ChaosCluster
from .history import History
from .lazyfs import LazyFS
from .report import write_scenario, write_summary
from .scenarios import SCENARIOS, Run
from .schedule_checker import check_schedules, schedule_violations
from .toxiproxy_server import ToxiproxyServer, launch
from .workload import Workload

# Load runs this long before the fault and after it, on purpose: the history must hold
# messages acknowledged, due and consumed on each side of the fault, not just around it.
WARMUP_S = 4.0
SETTLE_S = 4.0
# Each side runs on until this many produces were acknowledged in it, for at most
# PHASE_LIMIT_S: on a loaded machine, where the cluster acknowledges fewer a second, a
# side still holds as many messages (a quick scenario's power loss, whose nodes took 9 s
# to come back, acknowledged 280 in all). A cluster that cannot reach it in the limit
# hardly ran, which the quick subset's test reports.
PHASE_ACKED = 300
PHASE_LIMIT_S = 60.0
# The quick subset (`make test`, --quick) produces for nearer deliver times, so its drain,
# which waits for the last one, takes a third of the time; the faults are the same.
QUICK_WORKLOAD = {"horizon_ms": 10_000, "hot_every_ms": 5_000}


def run_scenario(
    name: str, seed: int, work: str, out: str, toxiproxy: ToxiproxyServer, *, quick: bool = False
) -> dict:
    """One scenario from a fresh cluster to its verdict; writes ``<out>/<name>.json|png``.
    ``quick``: with :data:`QUICK_WORKLOAD` under the scenario's own workload options."""
    scenario = SCENARIOS[name]
    print(f"{name}: seed {seed} (toxiproxy: {toxiproxy.kind})", flush=True)
    root = os.path.join(work, name)
    disk = None
    if scenario.power_loss:  # node data on a file system that can lose unsynced writes
        disk = LazyFS(
            os.path.join(root, "disk"),
            os.path.join(root, "data"),
            log_path=os.path.join(root, "lazyfs.log"),
            cut_on_rename_to=scenario.power_cut_on_rename,
            out_of_order=seed if scenario.out_of_order else None,
        )
        disk.start()
    try:
        cluster = ChaosCluster(
            root, toxiproxy, extra_toml=scenario.node_toml, data_root=disk and str(disk.mountpoint)
        )
        for i, offset in scenario.skew.items():
            cluster.skew(i, offset)
        for i in scenario.steppable:
            cluster.steppable(i)
        history = History(seed)
        options = {**QUICK_WORKLOAD, **scenario.workload} if quick else scenario.workload
        workload = Workload(cluster.client_urls, CLIENT, history, **options)
        run = Run(cluster, workload, history, random.Random(seed), disk=disk)
        began = time.monotonic()
        try:
            cluster.start_all()
            workload.start()
            _load_for(history, WARMUP_S)
            try:
                scenario.run(run)
            except Exception as e:  # noqa: BLE001 - a fault that went wrong is a finding, not a crash
                run.violations.append(f"the scenario did not complete: {type(e).__name__}: {e}")
                run.undo_faults()  # the verdict then reads every member's log, caught up
            _load_for(history, SETTLE_S)
            run.drain()
        finally:
            run.tear_down()
        result = verdict(run, began, toxiproxy.kind, scenario.early_allowance_ms, scenario=name)
    finally:
        if disk is not None:
            disk.stop()
    write_scenario(out, name, result)
    history.save(os.path.join(out, f"{name}.history.json"))
    p99 = result["lateness_ms"]["p99"]
    print(
        f"  {name}: {'pass' if not result['violations'] else 'FAIL ' + '; '.join(result['violations'])}"
        f" ({result['acknowledged']} acked, lateness p99 {'-' if p99 is None else f'{p99:.1f}'} ms,"
        f" recover {result['time_to_recover_ms']} ms)",
        flush=True,
    )
    return result


def _load_for(history: History, least_s: float) -> None:
    """Let the load run ``least_s``, and on until :data:`PHASE_ACKED` more produces were
    acknowledged (at most :data:`PHASE_LIMIT_S` in all)."""
    began, before = time.monotonic(), history.count("produced")
    time.sleep(least_s)
    while history.count("produced") - before < PHASE_ACKED and time.monotonic() - began < PHASE_LIMIT_S:
        time.sleep(0.1)


def verdict(
    run: Run,
    began: float,
    toxiproxy_kind: str,
    early_allowance_ms: int,
    allowance_windows: list[tuple[int, int]] | None = None,
    **about,
) -> dict:
    """The checker's result on ``run`` (its nodes stopped): the history against every
    node's ready log, with what the run was (``about`` too) and every violation."""
    ready, errors, answers_to = read_ready_logs(run.cluster, run.workload.topic, run.retired)
    history = run.history.to_dict()
    result = check(history, ready, errors, early_allowance_ms, allowance_windows, answers_to)
    if history["schedules"]:
        result.update(check_schedules(history))
    result.update(
        seed=run.history.seed,
        start_ms=run.history.start_ms,
        faults=run.history.faults,
        notes=run.history.notes,
        duration_s=time.monotonic() - began,
        toxiproxy=toxiproxy_kind,
        **about,
    )
    result["violations"] = violations(result) + schedule_violations(result) + run.violations
    return result


def read_ready_logs(
    cluster: ChaosCluster, topic: str, retired: set[int] = frozenset()
) -> tuple[dict, dict, dict[str, str]]:
    """Every (stopped) member's ready log for ``topic``, its store check's complaint, and
    the id each rescheduled copy in the first member's log answers to (by its place). A
    node removed from the membership (``retired``) stopped taking entries: not read."""
    ready, errors, answers_to = {}, {}, {}
    members = [i for i in cluster.indexes if i not in retired]
    for i in members:
        node = f"n{i + 1}"
        try:
            store = cluster.store(i)
        except StorageError as e:  # a node that could not start on it either: a violation
            errors[node] = f"cannot open: {type(e).__name__}: {e}"
            ready[node] = np.empty(0, dtype=READY.dtype)
            continue
        with store:
            try:
                check_store(store)
                errors[node] = None
            except Exception as e:  # noqa: BLE001 - reported as a violation
                errors[node] = f"{type(e).__name__}: {e}"
            rows = ready[node] = store.read_ready(topic)
            if i == members[0]:
                places = list(map(MessageId, rows["hour"].tolist(), rows["global_index"].tolist()))
                originals = store.original_ids(places)
                answers_to = {str(p): str(o) for p, o in zip(places, originals, strict=True) if p != o}
    return ready, errors, answers_to


@click.command(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-s",
    "--scenario",
    "names",
    multiple=True,
    type=click.Choice(sorted(SCENARIOS)),
    help="Run this scenario (repeatable). Default: all.",
)
@click.option("--quick", is_flag=True, help="The quick subset as `make test` runs it (nearer deliver times).")
@click.option(
    "--seed", type=int, default=None, help="Seed for every random choice. Default: a new one, printed."
)
@click.option("--out", default="chaos-report", show_default=True, help="Folder for REPORT.md, JSON and PNGs.")
@click.option("--keep", is_flag=True, help="Keep the nodes' data folders and logs (printed).")
def main(names: tuple[str, ...], quick: bool, seed: int | None, out: str, keep: bool) -> None:
    names = names or tuple(n for n, s in SCENARIOS.items() if s.quick or not quick)
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    print(f"seed {seed}; scenarios: {', '.join(names)}", flush=True)
    work = tempfile.mkdtemp(prefix="horologe-chaos-")
    toxiproxy = launch(os.path.join(work, "toxiproxy.log"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    results = {}
    try:
        for name in names:
            results[name] = run_scenario(name, seed, work, out, toxiproxy, quick=quick)
    finally:
        toxiproxy.stop()
        if keep:
            print(f"data and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report = write_summary(out, results)
    failed = [n for n, r in results.items() if r["violations"]]
    print(f"report: {report}; {len(results) - len(failed)} passed, {len(failed)} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
