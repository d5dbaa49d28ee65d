"""``python -m bench [--only hot,lateness] [--quick] [--big]``: the edge benchmarks.

Runs every workload on Horologe (3 nodes; ingest and lateness also on 5) and on the
Redis peer (primary + replica, ``appendfsync everysec``), and the write workloads also
on the durable peer (the same with ``appendfsync always``), one after the other on fresh
instances, then prints a table with Horologe ÷ peer,
writes one JSON line per figure and a PNG plot under ``bench/out/``.
``--baseline COMMIT`` also runs the nodes of an earlier commit in the same run (an A/B of
node code: a worktree on ``PYTHONPATH`` would not do, since the installed package maps
``horologe.node`` and the other parts to this tree's folders).
"""

from __future__ import annotations

import datetime
import os
import shutil
import sys
import tempfile
import time

import click

from testkit.old_release import MissingHistoryError

from .edge import report
from .edge.costs import Costs
from .edge.horologe_system import HorologeSystem
from .edge.redis_system import RedisSystem
from .edge.report import DURABLE_PEER_WORKLOADS
from .edge.workloads import WORKLOADS, Scale

FIVE_NODE_WORKLOADS = ("ingest", "lateness")  # also run on 5 nodes: the price of surviving two failures
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def _systems(root: str, workload: str, compare_toml: str, baseline: HorologeSystem | None):
    yield HorologeSystem(os.path.join(root, "horologe"))
    if compare_toml:
        yield HorologeSystem(os.path.join(root, "horologe-compared"), node_toml=compare_toml)
    if baseline is not None:
        yield baseline
    if workload in FIVE_NODE_WORKLOADS:
        yield HorologeSystem(os.path.join(root, "horologe-5"), nodes=5)
    yield RedisSystem(os.path.join(root, "redis"))
    if workload in DURABLE_PEER_WORKLOADS:
        yield RedisSystem(os.path.join(root, "redis-durable"), fsync="always")
    if workload in ("lateness", "hot"):
        poll = RedisSystem(os.path.join(root, "redis-poll"), mode="poll")
        poll.name = "redis (10 ms poll)"
        yield poll


def _baseline(root: str, commit: str) -> HorologeSystem:
    """The baseline's system, its commit laid out now: a commit this clone lacks is an
    error before any workload runs."""
    click.echo(f"laying out {commit}'s packages ...", err=True)
    try:
        return HorologeSystem(os.path.join(root, "horologe-baseline"), commit=commit)
    except MissingHistoryError as e:
        raise click.BadParameter(str(e), param_hint="--baseline") from None


@click.command()
@click.option("--only", default="", help="comma-separated workloads: " + ",".join(WORKLOADS))
@click.option("--quick", is_flag=True, help="a tenth of the counts: a smoke run, not figures to quote")
@click.option("--big", is_flag=True, help="also measure memory at 10,000,000 pending")
@click.option("--out", "out_dir", default=OUT, show_default=True, help="where JSON lines and the plot go")
@click.option(
    "--compare-toml",
    default="",
    help="also run Horologe with these node settings (TOML lines, ';' between them, e.g. "
    "'fsync = true'): its figures get rows of their own, with their ratio to the same peer",
)
@click.option(
    "--baseline",
    default="",
    metavar="COMMIT",
    help="also run the nodes of this commit (an A/B in the same run; the SDK stays this "
    "tree's): its figures get rows of their own, labelled with the commit",
)
def main(only: str, quick: bool, big: bool, out_dir: str, compare_toml: str, baseline: str) -> None:
    """Horologe against a Redis sorted-set delay queue, measured at the user's edge."""
    chosen = [w.strip() for w in only.split(",") if w.strip()] or list(WORKLOADS)
    unknown = set(chosen) - set(WORKLOADS)
    if unknown:
        raise click.BadParameter(f"unknown workload(s) {', '.join(sorted(unknown))}", param_hint="--only")
    scale = Scale()
    scale = scale.quick() if quick else scale.big() if big else scale
    results: dict[str, dict[str, dict]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="horologe-bench-") as root:
        # The options first (a commit this clone lacks), then what the machine lacks.
        base = _baseline(root, baseline) if baseline else None
        if shutil.which("redis-server") is None:
            raise click.UsageError(
                "redis-server is not on PATH; every workload runs next to it (Debian's redis-server: "
                "`make bench` installs it, or apt-get install redis-server)"
            )
        for workload in chosen:
            results[workload] = {}
            for system in _systems(root, workload, compare_toml.replace(";", "\n"), base):
                click.echo(f"[{time.monotonic() - started:6.0f} s] {workload} on {system.name} ...", err=True)
                system.start()
                try:
                    costs = Costs(system)
                    costs.start()
                    figures = WORKLOADS[workload](system, scale)
                    results[workload][system.name] = {**figures, **costs.figures()}
                except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
                    click.echo(f"  {workload} on {system.name} failed: {e!r}", err=True)
                    results[workload][system.name] = {"_error": repr(e)}
                finally:
                    system.stop()
    table = report.rows(results)
    os.makedirs(out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    meta = {"date": stamp, "quick": quick, "cpus": os.cpu_count()}
    report.write_json_lines(os.path.join(out_dir, f"edge-{stamp}.jsonl"), table, meta)
    plotted = report.plot(os.path.join(out_dir, f"edge-{stamp}.png"), results)
    click.echo(report.markdown(table))
    what = "JSON lines and plot" if plotted else "JSON lines"
    took = time.monotonic() - started
    click.echo(f"\n{len(table)} figures in {took:.0f} s; {what} in {out_dir}/edge-{stamp}.*")


if __name__ == "__main__":
    sys.exit(main())
