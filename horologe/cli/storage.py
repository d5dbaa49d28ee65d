"""``horologe storage ...``: check and inspect a node's data directory, offline."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import click

from horologe.cli._common import utc_time
from horologe.cluster.backup import manifest as backup_manifest
from horologe.cluster.backup.manifest import MANIFEST_NAME
from horologe.cluster.store_report import storage_report
from horologe.node.data_lock import lock_data_dir
from horologe.node.errors import DataDirInUseError
from horologe.storage import InvalidFieldError, Storage, StorageError, check_store
from horologe.storage.hour_names import hour_name
from horologe.storage.message_json import parse_duration


@click.group()
def storage() -> None:
    """Inspect and verify a stopped node's store folder, or a backup of a running one."""


@contextlib.contextmanager
def _open_store(data_dir: str) -> Iterator[Storage]:
    """The store in DATA_DIR, or, for a backup's folder, its store (read-only: a backup
    stays as it was), once the backup's files are checked against their SHA-256. A node's
    store is opened as its node opens it (a torn tail set aside), so only while no node
    process holds its data folder's lock (node/data_lock.py), which it holds meanwhile."""
    if os.path.isfile(os.path.join(data_dir, MANIFEST_NAME)):
        try:
            manifest = backup_manifest.read(data_dir)
            with click.progressbar(
                length=manifest.total_bytes, label="checking the backup", file=sys.stderr
            ) as bar:
                backup_manifest.check(data_dir, bar.update)
        except backup_manifest.BackupError as e:
            raise click.ClickException(str(e)) from e
        taken = utc_time(manifest.taken_at_ms)
        click.echo(
            f"backup of      node {manifest.node_id} at {taken}, Raft index {manifest.raft.index} "
            f"(term {manifest.raft.term}), {len(manifest.files)} files checked"
        )
        data_dir, read_only = os.path.join(data_dir, "store"), True
    else:
        read_only = False
    if not os.path.isfile(os.path.join(data_dir, "commits.log")):
        raise click.ClickException(
            f"{data_dir} is not a Horologe store (no commits.log): name <data_dir>/store, or a backup"
        )
    with contextlib.ExitStack() as held:
        # Where the link leads, if it is one. A node's folder holds no lock before it first ran.
        node_dir = os.path.dirname(os.path.realpath(data_dir))
        if not read_only and os.path.isfile(os.path.join(node_dir, "lock")):
            try:
                held.callback(os.close, lock_data_dir(node_dir))
            except DataDirInUseError as e:
                raise click.ClickException(
                    f"{e}: stop that node first, or check a backup of it (horologe backup)"
                ) from e
        try:
            store = Storage(data_dir, read_only=read_only)
        except StorageError as e:
            raise click.ClickException(str(e)) from e
        with store:
            yield store


@storage.command()
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
def check(data_dir: str) -> None:
    """Verify every checksum and invariant of DATA_DIR; exit 1 on the first fault.

    DATA_DIR is a node's store folder (<data_dir>/store) or a backup's folder, whose files
    are first checked against their SHA-256. Opening a node's store sets aside any torn
    tail (an uncommitted write cut short by a crash) into DATA_DIR/torn/ and says so.
    """
    with _open_store(data_dir) as store:
        for line in store.recovered:
            click.echo(f"recovered: {line}")
        try:
            with click.progressbar(length=len(store.hours()), label="checking hours", file=sys.stderr) as bar:
                report = check_store(store, on_hour=lambda _hour: bar.update(1))
        except StorageError as e:
            raise click.ClickException(f"corrupt: {e}") from e
    click.echo(
        f"ok: {_counted(report.messages, 'message')} in {_counted(report.hours, 'hour')}, "
        f"{report.cancelled:,} cancelled, "
        f"{sum(report.ready_entries.values()):,} delivered, {report.keys:,} keys"
    )


def _counted(n: int, thing: str) -> str:
    return f"{n:,} {thing}{'' if n == 1 else 's'}"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError


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
    with _open_store(data_dir) as store:
        r = storage_report(store, now_ms, retention_ms)
    click.echo(f"applied index  {r.applied_index}")
    click.echo(f"sealed before  {hour_name(r.sealed_before_hour)}")
    retained = hour_name(r.retained_from_hour) if r.retained_from_hour else "(nothing removed yet)"
    click.echo(f"retained from  {retained}")
    parts = ", ".join(f"{k} {_size(v)}" for k, v in sorted(r.disk_used.items()))
    click.echo(f"disk used      {_size(r.disk_total)}  ({parts})")
    gone = r.reclaim
    click.echo(
        f"reclaimable    {_size(gone.total)}  by a retention of {retention} before {utc_time(r.now_ms)}: "
        f"{_counted(gone.hours, 'hour')} ({_size(gone.hour_bytes)}), "
        f"{_counted(gone.segments, 'ready segment')} ({_size(gone.ready_bytes)})"
    )
    click.echo(
        f"key index      {r.live_keys:,} live keys; {r.dead_keys:,} dead entries ({_size(r.dead_key_bytes)}) "
        "reclaimed by cleaning as keys arrive"
    )
    for t in r.topics:
        held = f"offsets {t.base:,}..{t.count:,} held"
        click.echo(f"topic {t.topic_id:>4}     {t.name}  ({t.count:,} delivered, {held})")
    for hour, count in r.hours:
        click.echo(f"hour {hour_name(hour)}  {count:>10,} message{'' if count == 1 else 's'}")
