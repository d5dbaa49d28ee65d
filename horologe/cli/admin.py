"""The commands that take the admin token: status and release-master."""

from __future__ import annotations

import click

from horologe.cli._common import (
    _client,
    _echo_json,
    _sdk_errors,
    admin_option,
    ca_option,
    message_id_argument,
    token_option,
    url_option,
)


@click.command()
@url_option
@token_option
@admin_option
@ca_option
@message_id_argument
@_sdk_errors
def status(url, token, admin_token, ca, message_id) -> None:
    """Show MESSAGE_ID's state, or the node's status when no id is given."""
    client = _client(url, token, admin_token, ca)
    _echo_json(client.status(message_id) if message_id else client.node_status())


@click.command("release-master")
@url_option
@admin_option
@ca_option
@click.option("--to", help="Node id to hand mastership to (default: the most caught-up).")
@_sdk_errors
def release_master(url, admin_token, ca, to) -> None:
    """Make the master hand over: final sync, release marker, Raft transfer."""
    _echo_json(_client(url, None, admin_token, ca).release_master(to))
