"""``horologe cluster``: the cluster's membership (docs/deploy.md, "Membership")."""

from __future__ import annotations

import click

from horologe.cli._common import _client, _echo_json, _sdk_errors, admin_option, ca_option, url_option
from horologe.client import Client, HorologeError


@click.group()
def cluster() -> None:
    """The cluster's membership: list, add and remove nodes, one at a time, online.

    Replace a machine: start the new node with --join (its peers: the members), run
    `cluster add` for it, then `cluster remove` for the old one. Grow from 3 to 5 nodes:
    two adds, one after the other. Changes go to the master (any node's URL will do).
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
    client = _client(url, None, admin_token, ca)
    click.echo(f"feeding {node_id} the log at {raft_addr} (up to {catch_up_s:g} s), then adding it", err=True)
    _echo_json(client.add_member(node_id, raft_addr, http_addr, catch_up_s))


@cluster.command()
@url_option
@admin_option
@ca_option
@click.argument("node_id")
@_sdk_errors
def remove(url, admin_token, ca, node_id) -> None:
    """Remove member NODE_ID; if it is the master, it hands over first. Prints the members
    after. Stop its process afterwards: the others no longer talk to it."""
    client = _client(url, None, admin_token, ca)
    _echo_json(_remove(client, node_id))


def _remove(client: Client, node_id: str) -> list[dict]:
    try:
        return client.remove_member(node_id)
    except HorologeError as e:
        if e.code != "is_master":
            raise
    click.echo(f"{node_id} is the master: releasing it first", err=True)
    released = client.release_master()
    click.echo(f"{released['new_master']} is the master now", err=True)
    return client.remove_member(node_id)
