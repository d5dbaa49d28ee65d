"""``horologe storage ...``: check and inspect a node's data directory, offline."""

from __future__ import annotations

import datetime as dt
import os
import sys

import click

from horologe.cluster.committed_reads import watermark
from horologe.cluster.retention import plan, reclaimable
from horologe.storage import InvalidFieldError, Storage, StorageError
from horologe.storage.hour_names import hour_name
from horologe.storage.key_index import KEY_ENTRY
from horologe.storage.message_json import parse_duration


@click.group()
def storage() -> None:
    """Inspect and verify a node's data directory (stop the node first)."""


def _open_store(data_dir: str) -> Storage:
    if not os.path.isfile(os.path.join(data_dir, "commits.log")):
        raise click.ClickException(f"{data_dir} is not a Horologe data directory (no commits.log)")
    try:
        return Storage(data_dir)
    except StorageError as e:
        raise click.ClickException(str(e)) from e


@storage.command()
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
def check(data_dir: str) -> None:
    """Verify every checksum and invariant of DATA_DIR; exit 1 on the first fault.

    Opening the store sets aside any torn tail (an uncommitted write cut short by a
    crash) into DATA_DIR/torn/ and says so.
    """
    store = _open_store(data_dir)
    try:
        for line in store.recovered:
            click.echo(f"recovered: {line}")
        with click.progressbar(length=len(store.hours()), label="checking hours", file=sys.stderr) as bar:
            report = store.check(on_hour=lambda _hour: bar.update(1))
    except StorageError as e:
        raise click.ClickException(f"corrupt: {e}") from e
    finally:
        store.close()
    click.echo(
        f"ok: {report.messages:,} messages in {report.hours} hours, {report.cancelled:,} cancelled, "
        f"{sum(report.ready_entries.values()):,} delivered, {report.keys:,} keys"
    )


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")


def _disk_used(data_dir: str) -> dict[str, int]:
    """Bytes on disk under each top folder of a store (and its journal)."""
    used: dict[str, int] = {}
    for d, _, names in os.walk(data_dir):
        rel = os.path.relpath(d, data_dir)
        part = "journal" if rel == "." else rel.split(os.sep)[0]
        for n in names:
            used[part] = used.get(part, 0) + os.path.getsize(os.path.join(d, n))
    return used


@storage.command()
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--retention",
    default="7d",
    show_default=True,
    help="The node's retention, for what it could reclaim (ms, or like 36h / 7d).",
)
@click.option("--now", "now_ms", type=int, help="Epoch ms to reckon retention from (default: the watermark).")
def inspect(data_dir: str, retention: str, now_ms: int | None) -> None:
    """Summarise DATA_DIR: applied Raft index, disk used and reclaimable, topics, hours.

    Reclaimable is what the master's next retention cut would remove: ready-log segments
    delivered more than RETENTION before now that every consumer group has passed, then
    the hours no ready entry still names (docs/cluster.md, "Retention").
    """
    try:
        retention_ms = parse_duration(int(retention) if retention.isdigit() else retention)
    except InvalidFieldError as e:
        why = f"{retention!r}: want ms, or like 90s, 36h, 7d"
        raise click.BadParameter(why, param_hint="--retention") from e
    store = _open_store(data_dir)
    try:
        now = watermark(store).ms if now_ms is None else now_ms
        click.echo(f"applied index  {store.applied_index}")
        click.echo(f"sealed before  {hour_name(store.sealed_before_hour)}")
        retained = store.meta("retained_from_hour", 0)
        click.echo(f"retained from  {hour_name(retained) if retained else '(nothing removed yet)'}")
        used = _disk_used(data_dir)
        parts = ", ".join(f"{k} {_size(v)}" for k, v in sorted(used.items()))
        click.echo(f"disk used      {_size(sum(used.values()))}  ({parts})")
        cut = plan(store, now, retention_ms)
        gone = reclaimable(store, cut)
        click.echo(
            f"reclaimable    {_size(gone.total)}  by a retention of {retention} before {_when(now)}: "
            f"{gone.hours} hours ({_size(gone.hour_bytes)}), "
            f"{gone.segments} ready segments ({_size(gone.ready_bytes)})"
        )
        keys = store.key_index
        dead = keys.end - keys.cursor - keys.live
        click.echo(
            f"key index      {keys.live:,} live keys; {dead:,} dead entries ({_size(dead * KEY_ENTRY.size)}) "
            "reclaimed by cleaning as keys arrive"
        )
        for name, tid in sorted(store.topics().items(), key=lambda t: t[1]):
            base, count = store.ready_base(name), store.ready_count(name)
            click.echo(f"topic {tid:>4}     {name}  ({count:,} delivered, offsets {base:,}..{count:,} held)")
        for hour in store.hours():
            click.echo(f"hour {hour_name(hour)}  {store.bucket(hour).count:>10,} messages")
    finally:
        store.close()
