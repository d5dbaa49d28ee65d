"""``horologe schedule ...``: recurring schedules."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import click

from horologe.cli._common import _client, _instant, _sdk_errors, ca_option, token_option, url_option
from horologe.storage.message_json import body_json


@click.group()
def schedule() -> None:
    """Recurring schedules: a message to a topic at every fire time of a cron expression.

    The cron expression is read in a time zone's wall time: 5 fields (minute hour
    day-of-month month day-of-week) or 6 with seconds first. Across DST, a local time the
    clocks skip fires once at the next valid instant (the end of the gap), and one that
    repeats fires once, at its first occurrence. Each firing is a message keyed
    schedule:<name>:<fire epoch ms>, produced by the master up to a minute ahead: a
    failover neither repeats nor skips one. See docs/api.md, "Recurring schedules".
    """


def _schedule_json(s) -> dict:
    """A schedule as the API shows it, with its next fire times in UTC as well."""
    out = dataclasses.asdict(s)
    del out["body"]
    out |= body_json(s.body)
    out["tags"] = list(s.tags)
    out["next_fires_utc"] = [dt.datetime.fromtimestamp(t / 1000, dt.UTC).isoformat() for t in s.next_fires]
    return out


@schedule.command("create")
@url_option
@token_option
@ca_option
@click.argument("name")
@click.option("--topic", required=True, help="Topic each firing is produced to.")
@click.option(
    "--cron",
    required=True,
    help="When it fires: 5 fields ('0 2 * * *': 02:00 daily), or 6 with seconds first "
    "('*/10 * * * * *': every 10 s). Quote it.",
)
@click.option(
    "--timezone", "--tz", default="UTC", show_default=True, help="IANA time zone, e.g. Europe/Berlin."
)
@click.option("--body", required=True, help="Message body (text) of every firing.")
@click.option("--tag", "tags", multiple=True, help="A tag; repeat for more.")
@click.option("--header", "headers", multiple=True, help="NAME=VALUE; repeat for more.")
@click.option("--start-at", help="No firing before this: epoch ms or ISO-8601 with a zone.")
@click.option("--end-at", help="No firing from this on: epoch ms or ISO-8601 with a zone.")
@_sdk_errors
def schedule_create(url, token, ca, name, topic, cron, timezone, body, tags, headers, start_at, end_at):
    """Create the schedule NAME; prints it, with its next five fire times."""
    pairs = {}
    for h in headers:
        key, sep, value = h.partition("=")
        if not sep:
            raise click.UsageError(f"--header {h!r}: give NAME=VALUE")
        pairs[key] = value
    made = _client(url, token, ca=ca).create_schedule(
        name,
        topic,
        body,
        cron,
        timezone,
        tags=tags,
        headers=pairs,
        start_at=_instant(start_at, "--start-at"),
        end_at=_instant(end_at, "--end-at"),
    )
    click.echo(json.dumps(_schedule_json(made), indent=2))
    if made.state == "ended":
        click.echo(f"warning: {name} has ended already (--end-at is past): it will never fire", err=True)


@schedule.command("list")
@url_option
@token_option
@ca_option
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON, one a line.")
@_sdk_errors
def schedule_list(url, token, ca, as_json) -> None:
    """List every schedule: name, state, cron, zone and next fire time (UTC)."""
    found = _client(url, token, ca=ca).schedules()
    if as_json:
        for s in found:
            click.echo(json.dumps(_schedule_json(s)))
        return
    click.echo(f"{'name':<24} {'state':<7} {'cron':<20} {'timezone':<20} next fire (UTC)")
    for s in found:
        nxt = _schedule_json(s)["next_fires_utc"][:1] or ["-"]
        click.echo(f"{s.name:<24} {s.state:<7} {s.cron:<20} {s.timezone:<20} {nxt[0]}")


def _schedule_action(verb: str, help_text: str):
    @schedule.command(verb, help=help_text)
    @url_option
    @token_option
    @ca_option
    @click.argument("name")
    @_sdk_errors
    def run(url, token, ca, name) -> None:
        client = _client(url, token, ca=ca)
        if verb == "delete":
            client.delete_schedule(name)
            click.echo(f"deleted {name}")
            return
        call = {"get": client.schedule, "pause": client.pause_schedule, "resume": client.resume_schedule}[
            verb
        ]
        click.echo(json.dumps(_schedule_json(call(name)), indent=2))

    return run


_schedule_action("get", "Show the schedule NAME, with its next five fire times.")
_schedule_action(
    "pause",
    "Pause the schedule NAME: nothing more is planned, and its firings already planned "
    "(up to a minute ahead) are cancelled.",
)
_schedule_action(
    "resume",
    "Resume the schedule NAME: planned again from now; fire times that passed while it "
    "was paused are skipped. Resumed within a minute of its pause, it fires again only "
    "past where its planning had reached (planned_until, at most a minute after the pause): "
    "the firings the pause cancelled stay cancelled.",
)
_schedule_action("delete", "Delete the schedule NAME; its firings not yet delivered are cancelled.")
