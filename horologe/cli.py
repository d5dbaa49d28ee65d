"""The ``horologe`` command line."""

from __future__ import annotations

import os
import sys

import click

from horologe import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="horologe")
def main() -> None:
    """Horologe: a replicated delayed-message service.

    Node, cluster and client commands arrive with the cluster issue; what is here
    today works on a node's data directory.
    """


@main.group()
def storage() -> None:
    """Inspect and verify a node's data directory (stop the node first)."""


def _open_store(data_dir: str):
    from horologe.storage import Storage, StorageError

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
    from horologe.storage import StorageError

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


@storage.command()
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
def inspect(data_dir: str) -> None:
    """Summarise DATA_DIR: applied Raft index, topics, and messages per hour."""
    from horologe.storage.hour_names import hour_name

    store = _open_store(data_dir)
    try:
        click.echo(f"applied index  {store.applied_index}")
        click.echo(f"sealed before  {hour_name(store.sealed_before_hour)}")
        for name, tid in sorted(store.topics().items(), key=lambda t: t[1]):
            click.echo(f"topic {tid:>4}     {name}  ({store.ready_count(name):,} delivered)")
        for hour in store.hours():
            click.echo(f"hour {hour_name(hour)}  {store.bucket(hour).count:>10,} messages")
    finally:
        store.close()
