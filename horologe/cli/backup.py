"""``horologe backup`` and ``horologe restore`` (docs/deploy.md, Backup and restore)."""

from __future__ import annotations

import os
import sys
import time

import click
import httpx

from horologe.cli._common import DEFAULT_URL, admin_option, ca_option, retry_for, utc_time
from horologe.client import tls
from horologe.client.calls import Endpoints
from horologe.cluster.backup.manifest import BackupError, Manifest, read
from horologe.cluster.backup.receive import receive
from horologe.cluster.backup.restore import restore as restore_backup


def _summary(manifest: Manifest) -> str:
    return (
        f"node {manifest.node_id} at Raft index {manifest.raft.index} (term {manifest.raft.term}), "
        f"{len(manifest.files)} files, {manifest.total_bytes:,} bytes"
    )


@click.command()
@click.option(
    "--url",
    default=DEFAULT_URL,
    show_default=True,
    envvar="HOROLOGE_URL",
    show_envvar=True,
    help="The node to copy: any node of the cluster, a follower as well as the master. "
    "Of a comma-separated list, the first that answers and agrees (the next is tried when "
    "one cannot be reached or refuses; the list again while --retry-for lasts, when one "
    "could not be reached, answered 503 or knew no master).",
)
@admin_option
@ca_option
@click.option(
    "--to",
    "dest",
    required=True,
    type=click.Path(file_okay=False, writable=True),
    help="A new folder for the backup (it must not exist).",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Back up the node even when its copy may be behind the cluster's (it is not a voting "
    "member, knows no master or hears no majority): the last copy of a cluster that lost its "
    "majority. Refused otherwise.",
)
def backup(url: str, admin_token: str | None, ca: str | None, dest: str, allow_stale: bool) -> None:
    """Copy a running node's store into a new folder, consistent at one Raft index.

    The node hard-links its committed files between two applies and sends them; it goes on
    serving meanwhile. Every file is checked against the SHA-256 the node computed, and the
    folder appears only once whole (it is written to DEST.part first).
    """
    try:
        nodes = Endpoints(url).urls
        verify = tls.verify_setting(ca, True)
    except ValueError as e:  # a URL or a CA file that cannot be used
        raise click.UsageError(str(e)) from e
    if os.path.lexists(dest):
        raise click.UsageError(f"{dest} exists: name a new folder for the backup")
    began = time.monotonic()
    deadline = began + retry_for()
    headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else {}
    query = "?allow_stale=true" if allow_stale else ""
    with httpx.Client(verify=verify, timeout=httpx.Timeout(READ_S, connect=CONNECT_S)) as http:
        while True:
            failures, again = [], False
            for node in nodes:
                try:
                    manifest = _take(http, f"{node}/admin/backup{query}", headers, dest)
                    break
                except _Refused as e:
                    failures.append(f"{node} refused the backup: {e}")
                    again |= e.status == 503 or e.code == NOT_CURRENT  # an election, a node starting
                except httpx.TransportError as e:
                    failures.append(f"backup from {node} failed: {e!r}")
                    again = True  # down or out of reach: it may be back soon
                except httpx.HTTPError as e:
                    failures.append(f"backup from {node} failed: {e!r}")
                except BackupError as e:  # what it sent failed its check, or this machine could not keep it
                    raise click.ClickException(f"backup from {node} failed: {e}; nothing was kept") from e
                click.echo(f"{failures[-1]}; trying the next node", err=True)
            else:
                if again and time.monotonic() + AGAIN_S < deadline:
                    click.echo(f"no node backed up; trying again in {AGAIN_S:g} s (--retry-for)", err=True)
                    time.sleep(AGAIN_S)
                    continue
                raise click.ClickException(f"{'; '.join(failures)}; nothing was kept")
            break
    click.echo(f"backed up {_summary(manifest)} from {node} into {dest} in {time.monotonic() - began:.1f} s")


CONNECT_S = 5.0  # a node that does not take the connection by then is passed over
READ_S = 60.0  # a node that sends nothing for this long is passed over
AGAIN_S = 1.0  # between rounds of the nodes, while --retry-for lasts
NOT_CURRENT = "not_current"  # the node knows no master (yet): asked again while --retry-for lasts


class _Refused(Exception):
    """The node answered the backup with an error: its status and code."""

    def __init__(self, reason: str, status: int, code: str | None) -> None:
        super().__init__(reason)
        self.status, self.code = status, code


def _take(http: httpx.Client, url: str, headers: dict, dest: str) -> Manifest:
    with http.stream("GET", url, headers=headers) as response:
        if response.status_code != 200:
            response.read()
            raise _Refused(*_reason(response))
        total = int(response.headers.get("Horologe-Backup-Bytes", "0"))
        index = response.headers.get("Horologe-Backup-Index", "?")
        with click.progressbar(length=total, label=f"backup at Raft index {index}", file=sys.stderr) as bar:
            return receive(response.iter_bytes(), dest, bar.update)


def _reason(response: httpx.Response) -> tuple[str, int, str | None]:
    """What a refusal says, its status and its error code."""
    try:
        error = response.json()["error"]
        return (
            f"{response.status_code} {error['code']}: {error['message']}",
            response.status_code,
            error["code"],
        )
    except (ValueError, KeyError, TypeError):
        return f"{response.status_code} {response.text[:200]}", response.status_code, None


@click.command()
@click.argument("backup_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("data_dir", type=click.Path(file_okay=False, writable=True))
def restore(backup_dir: str, data_dir: str) -> None:
    """Make DATA_DIR a node's data folder holding exactly what BACKUP_DIR holds.

    Every file of the backup is checked first; DATA_DIR must be new or empty of a node's
    data, and a restore that fails (a full disk) leaves nothing in it. The backup itself is
    left as it was.

    A whole cluster: stop every node, restore the same backup into every node's data
    folder, then start them all with their usual configs.

    One node's lost disk, the others running: never start it again as the member it was
    (it lost its vote and could vote twice in one term). Take it out (horologe cluster
    remove), restore into its empty folder, start it with join = true and the current
    members as its peers, then horologe cluster add it (docs/deploy.md, "Backup and
    restore").
    """
    try:
        total = read(backup_dir).total_bytes
        with click.progressbar(length=total, label="checking the backup", file=sys.stderr) as bar:
            manifest = restore_backup(backup_dir, data_dir, bar.update)
    except BackupError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"restored the backup of {_summary(manifest)} into {data_dir}")
    click.echo(
        f"taken at {utc_time(manifest.taken_at_ms)}: a whole cluster restored from it forgets what came "
        "after, and may give the ids given out since then to new messages; clients must drop those "
        '(docs/deploy.md, "Restore a whole cluster")'
    )
