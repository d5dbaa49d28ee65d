"""``horologe subscription ...``: push subscriptions."""

from __future__ import annotations

import dataclasses
import json

import click

from horologe.cli._common import _client, _sdk_errors, ca_option, token_option, url_option


@click.group()
def subscription() -> None:
    """Push subscriptions: the master POSTs a group's messages, signed, to a URL of yours.

    Each push is a JSON POST with Horologe-Signature (check it with the SDK's
    verify_signature), Horologe-Message-Id, Horologe-Attempt and Horologe-Deliveries; a
    2xx acks it, anything else retries it at the next level, then dead-letters it. The
    URL's host must be in the master's push_allow (node config; empty by default).
    Delivery is at least once: a push with Horologe-Deliveries above 1, or a retry
    (Horologe-Attempt above 0) of one answered too late, may have come before, under the
    same Horologe-Message-Id. See docs/api.md, "Push subscriptions".
    """


def _subscription_target(command):
    """The options every subscription command takes, and its TOPIC and GROUP."""
    for option in (click.argument("group"), click.argument("topic"), ca_option, token_option, url_option):
        command = option(command)
    return command


def _subscription_json(sub) -> str:
    return json.dumps(dataclasses.asdict(sub), indent=2)


@subscription.command("put")
@_subscription_target
@click.option("--push-url", "push_url", required=True, help="Where to POST: http(s)://host[:port]/path.")
@click.option(
    "--secret",
    envvar="HOROLOGE_PUSH_SECRET",
    required=True,
    help="HMAC key of Horologe-Signature: 16-256 printable ASCII characters (or HOROLOGE_PUSH_SECRET).",
)
@click.option("--timeout-ms", type=int, help="A request not answered by then failed (default 10000).")
@click.option("--max-in-flight", type=int, help="Requests open at once, at most (default 10).")
@click.option(
    "--rate", "rate_per_s", type=int, help="Requests started per second, at most (default 0: no limit)."
)
@click.option("--tags", help='Tag filter, as a pull takes it: "a||b" (default "*").')
@_sdk_errors
def subscription_put(
    url, token, ca, topic, group, push_url, secret, timeout_ms, max_in_flight, rate_per_s, tags
):
    """Make GROUP a push group of TOPIC (or change it); prints it, without the secret."""
    made = _client(url, token, ca=ca).put_subscription(
        topic,
        group,
        push_url,
        secret,
        timeout_ms=timeout_ms,
        max_in_flight=max_in_flight,
        rate_per_s=rate_per_s,
        tags=tags,
    )
    click.echo(_subscription_json(made))


@subscription.command("get")
@_subscription_target
@_sdk_errors
def subscription_get(url, token, ca, topic, group) -> None:
    """Show the push subscription of GROUP on TOPIC, with the master's counters."""
    click.echo(_subscription_json(_client(url, token, ca=ca).subscription(topic, group)))


@subscription.command("delete")
@_subscription_target
@_sdk_errors
def subscription_delete(url, token, ca, topic, group) -> None:
    """Stop pushing GROUP's messages of TOPIC (its progress stays)."""
    _client(url, token, ca=ca).delete_subscription(topic, group)
    click.echo(f"deleted {topic}/{group}")
