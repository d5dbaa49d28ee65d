"""``horologe cluster``: the cluster's membership (docs/deploy.md, "Membership")."""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

import click

from horologe.cli._common import _client, _echo_json, _sdk_errors, admin_option, ca_option, url_option
from horologe.client import Client, HorologeError
from horologe.client.calls import node_urls
from horologe.client.membership_change import change_until_made

ANY_ADDRESS = ("0.0.0.0", "::", "")  # a node listening on every interface lists these
PROGRESS_S = 2.0  # how often `cluster add` looks at the new node's catch-up
STILL_S = 10.0  # a catch-up that did not move is said again this often, with how long


@click.group()
def cluster() -> None:
    """The cluster's membership: list, add and remove nodes, one at a time, online.

    Replace a machine: start the new node with --join (its peers: the members), run
    `cluster add` for it, then `cluster remove` for the old one. Grow from 3 to 5 nodes:
    two adds, one after the other. Changes go to the master: any node's URL will do, and
    the command then reaches every member at the HTTP address the cluster lists for it.
    An answer that leaves a change unsure (the master stopped leading with it proposed)
    is followed by a look at the members, and the change is asked again if they lack it.
    """


@cluster.command()
@url_option
@admin_option
@ca_option
@_sdk_errors
def members(url, admin_token, ca) -> None:
    """List the members as the node at --url has them: id, addresses, voter, linked."""
    _echo_json(_client(url, None, admin_token, ca).members())


@cluster.command()
@url_option
@admin_option
@ca_option
@click.argument("node_id")
@click.option(
    "--raft", "raft_addr", required=True, help="The new node's Raft address, host:port (its identity)."
)
@click.option("--http", "http_addr", required=True, help="The new node's HTTP address, host:port.")
@click.option(
    "--catch-up-s",
    type=click.FloatRange(min=1, max=86_400),
    default=600.0,
    show_default=True,
    help="How long the new node may take to catch up (a snapshot of the whole store) "
    "before the add is given up.",
)
@_sdk_errors
def add(url, admin_token, ca, node_id, raft_addr, http_addr, catch_up_s) -> None:
    """Add NODE_ID, already started with --join: the master feeds it the log, then commits it
    as a member. Prints the members after."""
    client = _members_client(url, admin_token, ca)
    click.echo(
        f"adding {node_id}: once it answers at {http_addr} as {node_id}, started to join, the master "
        f"feeds it the log at {raft_addr} (up to {catch_up_s:g} s), then commits it",
        err=True,
    )
    outcome: dict = {}

    def add_it() -> None:
        try:
            outcome["members"] = _until_made(
                client,
                node_id,
                lambda: client.add_member(node_id, raft_addr, http_addr, catch_up_s),
                member_after=True,
            )
        except BaseException as e:  # noqa: BLE001 - raised again on the main thread
            outcome["error"] = e

    adding = threading.Thread(target=add_it, daemon=True)
    adding.start()
    with _Progress(url, admin_token, ca, node_id) as watch:
        while adding.is_alive():
            adding.join(PROGRESS_S)
            if adding.is_alive():
                watch.show()
    if "error" in outcome:
        raise outcome["error"]
    _echo_json(outcome["members"])


@cluster.command()
@url_option
@admin_option
@ca_option
@click.argument("node_id")
@_sdk_errors
def remove(url, admin_token, ca, node_id) -> None:
    """Remove member NODE_ID; if it is the master, it hands over first. Prints the members
    after. Stop its process afterwards: the others no longer talk to it."""
    _echo_json(_remove(_members_client(url, admin_token, ca), node_id))


def _members_client(url: str, admin_token, ca) -> Client:
    """A client of the nodes given and of every member at the HTTP address the cluster lists
    for it (the scheme the URLs given have): the SDK follows a redirect only to a host it
    was given, and a follower names the master by its own address, another host but on
    one machine. An address that listens on every interface names no host to dial."""
    given = node_urls(url)
    with _client(url, None, admin_token, ca) as entry:
        listed = [_member_url(m["http"], url) for m in entry.members()]
    return _client(",".join(dict.fromkeys(given + [u for u in listed if u])), None, admin_token, ca)


def _member_url(http: str, given: str) -> str | None:
    """A member's listed HTTP address as a URL (the scheme of the URLs given, unless it
    names one); None for an address that listens on every interface, no host to dial."""
    url = http if "://" in http else f"{urlsplit(node_urls(given)[0]).scheme}://{http}"
    return None if urlsplit(url).hostname in ANY_ADDRESS else url


class _Progress:
    """Prints a learner's catch-up as the master reports it when it moved, and every
    ``STILL_S`` with how long it has not: a stuck add is not silent until it gives up. Its
    calls are quick and never retried: a look that fails is skipped, the add goes on."""

    def __init__(self, url: str, admin_token, ca, node_id: str, clock=time.monotonic) -> None:
        self._url, self._admin_token, self._ca, self._node_id = url, admin_token, ca, node_id
        self._clients: list[Client] = []
        self._entry: Client | None = None
        self._master: Client | None = None
        self._clock = clock
        self._shown = None
        self._moved_at = self._said_at = clock()

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc) -> None:
        for c in self._clients:
            c.close()

    def _client(self, url: str) -> Client:
        """A client of ``url``: one node's, or the comma-separated list given."""
        c = Client(url, "", admin_token=self._admin_token, ca=self._ca, retry_s=0, timeout=1.0)
        self._clients.append(c)
        return c

    def show(self) -> None:
        try:
            learner = next((m for m in self._on_master().members() if m["node_id"] == self._node_id), {})
        except HorologeError:
            if self._master is not None:  # another master, perhaps: look for it again next time
                self._clients.remove(self._master)
                self._master.close()
                self._master = None
            return
        held = learner.get("catch_up")
        if not held:
            return
        now = self._clock()
        line = f"{self._node_id} holds the log up to {held['held']:,} of {held['target']:,}"
        if held != self._shown:
            self._shown, self._moved_at, self._said_at = held, now, now
            click.echo(line, err=True)
        elif now - self._said_at >= STILL_S:
            self._said_at = now
            click.echo(f"{line}, no further for {now - self._moved_at:.0f} s", err=True)

    def _on_master(self) -> Client:
        """A client of the master's own URL: only the master reports a learner."""
        if self._master is None:
            if self._entry is None:
                self._entry = self._client(self._url)  # whichever node listed answers
            leader = self._entry.node_status().get("leader")
            http = next((m["http"] for m in self._entry.members() if m["node_id"] == leader), None)
            if http is None:  # no master known now (an election): ask again next time
                raise HorologeError(f"no master is known to {self._url} now")
            url = _member_url(http, self._url)
            if url is None:  # it listens on every interface: no host of its own to ask
                raise HorologeError(f"the master lists {http}, no host to reach it at")
            self._master = self._client(url)
        return self._master


def _remove(client: Client, node_id: str) -> list[dict]:
    def remove_it() -> list[dict]:
        try:
            return client.remove_member(node_id)
        except HorologeError as e:
            if e.code != "is_master":
                raise
        click.echo(f"{node_id} is the master: releasing it first", err=True)
        released = client.release_master()
        click.echo(f"{released['new_master']} is the master now", err=True)
        return client.remove_member(node_id)

    return _until_made(client, node_id, remove_it, member_after=False)


def _until_made(client: Client, node_id: str, ask, member_after: bool) -> list[dict]:
    """``ask()`` until the change is made, as docs/api.md says (membership_change.py)."""
    return change_until_made(client, node_id, ask, member_after, lambda text: click.echo(text, err=True))
