"""The message verbs: produce, consume, reschedule, cancel, and the pending views (pending, forecast)."""

from __future__ import annotations

import datetime as dt
import json

import click

from horologe.cli._common import (
    _client,
    _echo_json,
    _instant,
    _ms_or_text,
    _sdk_errors,
    ca_option,
    message_id_argument,
    token_option,
    url_option,
)
from horologe.client.limits import MAX_ITEMS, MAX_PENDING_PAGE
from horologe.storage.message_json import body_json


@click.command()
@url_option
@token_option
@ca_option
@click.option("--topic", required=True)
@click.option("--body", help="Message body (text); or --body-file.")
@click.option(
    "--body-file",
    type=click.File("rb"),
    help="Message body: the bytes of this file, or of standard input for - (up to 256 KiB, binary too).",
)
@click.option("--tag", "tags", multiple=True, help="A tag; repeat for more.")
@click.option(
    "--key",
    help="Producer key: while its message is kept, the same key stores nothing new and prints that "
    "message's id and deliver time.",
)
@click.option("--at", "deliver_at", help="Deliver at: epoch ms or ISO-8601 with a zone.")
@click.option("--after", "deliver_after", help="Deliver after: ms, or 500ms / 90s / 5m / 2h / 3d.")
@click.option("--level", "delay_level", type=int, help="RocketMQ delay level 1..18 (1s .. 2h).")
@click.option(
    "--max-lateness", help="How late it may fall due (ms, or 90s / 5m ...); then --on-late applies."
)
@click.option(
    "--on-late",
    type=click.Choice(["deliver", "dlq", "drop"]),
    help="Past --max-lateness: deliver anyway (default), dead-letter it for every group, or drop it.",
)
@_sdk_errors
def produce(
    url,
    token,
    ca,
    topic,
    body,
    body_file,
    tags,
    key,
    deliver_at,
    deliver_after,
    delay_level,
    max_lateness,
    on_late,
) -> None:
    """Schedule one message; prints its id and deliver time (epoch ms). Without --at, --after
    or --level it is due now."""
    if (body is None) == (body_file is None):
        raise click.UsageError("give exactly one of --body and --body-file")
    if body_file is not None:
        body = body_file.read()
    _echo_json(
        _client(url, token, ca=ca).produce(
            topic,
            body,
            tags=tags,
            key=key,
            deliver_at=_instant(deliver_at, "--at"),
            deliver_after=_ms_or_text(deliver_after),
            delay_level=delay_level,
            max_lateness=_ms_or_text(max_lateness),
            on_late=on_late,
        )
    )


@click.command()
@url_option
@token_option
@ca_option
@click.option("--topic", required=True, help="Topic to consume (or %DLQ%<group>).")
@click.option("--group", required=True, help="Consumer group: its consumers share the messages.")
@click.option("--tags", default="*", show_default=True, help='Tag filter: "a||b" or "*".')
@click.option(
    "--max",
    "max_messages",
    type=click.IntRange(1, MAX_ITEMS),
    default=32,
    show_default=True,
    help="Messages per pull.",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    help="Take, print and ack this many messages, then stop (default: run until Ctrl-C).",
)
@click.option("--nack", is_flag=True, help="Nack instead of ack (exercise retries and the DLQ).")
@_sdk_errors
def consume(url, token, ca, topic, group, tags, max_messages, count, nack) -> None:
    """Print messages as they arrive, one JSON line each, and ack them.

    A body that is not UTF-8 is printed as ``body_b64``. A pull takes no more than --count
    still wants: what is not printed is not acked, so it stays for the group."""
    client = _client(url, token, ca=ca)
    seen = 0
    try:
        while count is None or seen < count:
            want = max_messages if count is None else min(max_messages, count - seen)
            batch = client.pull(topic, group, tags=tags, max=want, wait_ms=5_000)
            for m in batch:
                line = {"id": m.id, "topic": m.topic, "tags": list(m.tags)} | body_json(m.body)
                line |= {"deliver_at": m.deliver_at, "delivered_at": m.delivered_at, "attempt": m.attempt}
                click.echo(json.dumps(line))
            if batch:
                receipts = [m.receipt for m in batch]
                (client.nack if nack else client.ack)(topic, group, receipts)
                seen += len(batch)
    except KeyboardInterrupt:
        pass


def _by_id_or_key(fn):
    """MESSAGE_ID, or --topic and --key: the ways a command names one message."""
    for option in reversed(
        (
            message_id_argument,
            click.option("--topic", help="With --key: name the message by its producer key instead of id."),
            click.option("--key", help="Producer key (with --topic)."),
        )
    ):
        fn = option(fn)
    return fn


def _one_message(message_id, topic, key) -> None:
    if message_id and (topic or key):
        raise click.UsageError("give MESSAGE_ID, or --topic and --key: not both")
    if not message_id and not (topic and key):
        raise click.UsageError("give MESSAGE_ID, or --topic and --key")


@click.command()
@url_option
@token_option
@ca_option
@_by_id_or_key
@click.option("--at", "deliver_at", help="New time: epoch ms or ISO-8601 (2026-12-01T09:00:00Z).")
@click.option("--after", "deliver_after", help="New time from now: ms, or 500ms, 90s, 5m, 2h, 3d.")
@_sdk_errors
def reschedule(url, token, ca, message_id, topic, key, deliver_at, deliver_after) -> None:
    """Move a scheduled message to a new time (--at or --after); its id stays the same.

    By MESSAGE_ID, or by --topic and --key. Fails (exit 1) once the message was delivered
    or cancelled."""
    _one_message(message_id, topic, key)
    if (deliver_at is None) == (deliver_after is None):
        raise click.UsageError("give exactly one of --at and --after")
    when = {"deliver_at": _instant(deliver_at, "--at"), "deliver_after": _ms_or_text(deliver_after)}
    client = _client(url, token, ca=ca)
    if message_id:
        _echo_json(client.reschedule(message_id, **when))
    else:
        _echo_json(client.reschedule_key(topic, key, **when))


@click.command()
@url_option
@token_option
@ca_option
@_by_id_or_key
@_sdk_errors
def cancel(url, token, ca, message_id, topic, key) -> None:
    """Cancel a scheduled message by MESSAGE_ID, or by --topic and --key."""
    _one_message(message_id, topic, key)
    client = _client(url, token, ca=ca)
    if message_id:
        client.cancel(message_id)
    else:
        client.cancel_key(topic, key)
    click.echo("cancelled")


@click.command()
@url_option
@token_option
@ca_option
@click.option("--topic", help="One topic (default: every topic).")
@click.option("--bucket", type=click.Choice(["1m", "1h", "1d"]), default="1h", show_default=True)
@click.option("--from", "start", help="Epoch ms or ISO-8601 with a zone (default: now).")
@click.option("--to", "end", help="Epoch ms or ISO-8601 with a zone (default: 60 x 1m, 48 x 1h or 30 x 1d).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@_sdk_errors
def forecast(url, token, ca, topic, bucket, start, end, as_json) -> None:
    """How many pending messages fall due in each minute, hour or day."""
    start, end = _instant(start, "--from"), _instant(end, "--to")
    f = _client(url, token, ca=ca).forecast(topic, bucket, start, end)
    if as_json:
        _echo_json(f)
        return
    click.echo(f"{'due (UTC)':<17} {'pending':>10}   topic: {f.topic or 'all'}")
    if f.before:
        click.echo(f"{'before':<17} {f.before:>10}")
    for start_ms, count in f.buckets:
        at = dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{at:<17} {count:>10}")


@click.command()
@url_option
@token_option
@ca_option
@click.option("--topic", required=True)
@click.option("--from", "start", help="Only those due from this time: epoch ms or ISO-8601 with a zone.")
@click.option("--to", "end", help="Only those due before this time.")
@click.option(
    "--limit", default=100, show_default=True, type=click.IntRange(1), help="Messages to show at most."
)
@click.option("--with-body", is_flag=True, help="Show bodies too.")
@click.option("--key", help="Only the message of this producer key (exit 1 when none is pending).")
@_sdk_errors
def pending(url, token, ca, topic, start, end, limit, with_body, key) -> None:
    """List a topic's pending messages in the order they will fire, one JSON line each."""
    start, end = _instant(start, "--from"), _instant(end, "--to")
    client = _client(url, token, ca=ca)
    if key is not None:
        if start is not None or end is not None:
            raise click.UsageError("--key looks one message up: give no --from or --to with it")
        page = client.pending(topic, with_body=with_body, key=key)
        if not page.messages:
            raise click.ClickException(f"no pending message of topic {topic!r} has key {key!r}")
        _echo_pending(page.messages)
        return
    cursor, shown = None, 0
    while shown < limit:
        page = client.pending(
            topic, start, end, limit=min(MAX_PENDING_PAGE, limit - shown), cursor=cursor, with_body=with_body
        )
        _echo_pending(page.messages)
        shown += len(page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break


def _echo_pending(messages) -> None:
    """One JSON line per pending message (``body`` or ``body_b64`` when it was asked for)."""
    for m in messages:
        line = {"id": m.id, "deliver_at": m.deliver_at, "fires_at": m.fires_at, "tags": list(m.tags)}
        line |= {"key": m.key, "headers": m.headers}
        if m.body is not None:
            line |= body_json(m.body)
        click.echo(json.dumps(line))
