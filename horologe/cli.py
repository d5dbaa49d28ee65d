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

    Start a local cluster with `horologe local-cluster`, then use produce, status and
    release-master against it. Tokens come from --token / HOROLOGE_CLIENT_TOKEN and
    --admin-token / HOROLOGE_ADMIN_TOKEN. For nodes serving HTTPS, give https:// URLs and
    --ca / HOROLOGE_CA, the CA that signed their certificates (always verified).
    """


DEFAULT_URL = "http://127.0.0.1:8081"
url_option = click.option(
    "--url",
    default=DEFAULT_URL,
    show_default=True,
    envvar="HOROLOGE_URL",
    help="Node URLs, comma-separated: http://host:port, or https://host:port for nodes "
    "serving TLS (writes are redirected to the master).",
)
token_option = click.option("--token", envvar="HOROLOGE_CLIENT_TOKEN", help="Client token.")
admin_option = click.option("--admin-token", envvar="HOROLOGE_ADMIN_TOKEN", help="Admin token.")
ca_option = click.option(
    "--ca",
    envvar="HOROLOGE_CA",
    show_envvar=True,
    type=click.Path(exists=True, readable=True),
    help="For https:// URLs: PEM file (or directory) of the CA that signed the nodes' "
    "certificates. Default: certifi's bundle, or SSL_CERT_FILE's. Certificates are always verified.",
)


def _client(url: str, token: str | None, admin_token: str | None = None, ca: str | None = None):
    from horologe.client import Client

    try:
        return Client([u.strip() for u in url.split(",")], token or "", admin_token=admin_token, ca=ca)
    except ValueError as e:  # a URL, a token or a CA file the client cannot use
        raise click.UsageError(str(e)) from e


def _echo_json(obj) -> None:
    import dataclasses
    import json

    click.echo(json.dumps(dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj, indent=2))


def _sdk_errors(fn):
    """Turn SDK errors into one-line CLI errors (exit 1)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from horologe.client import HorologeError

        try:
            return fn(*args, **kwargs)
        except HorologeError as e:
            raise click.ClickException(str(e)) from e

    return wrapper


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Node TOML file (DESIGN §6).")
@click.option("--node-id", help="Overrides node_id.")
@click.option("--data-dir", help="Overrides data_dir.")
@click.option("--http", "http_addr", help="Overrides http (host:port).")
@click.option("--raft", "raft_addr", help="Overrides raft (host:port; also this node's identity).")
@click.option(
    "--insecure-dev",
    is_flag=True,
    default=None,
    help="Allow running without tokens and cluster secret. Never in production.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    help="Overrides log_format: text lines, or one JSON object per line for log shippers.",
)
@click.option(
    "--check-config",
    is_flag=True,
    help="Validate the configuration (file, HOROLOGE_* env, flags), print it without secrets, and exit.",
)
def node(config_path, node_id, data_dir, http_addr, raft_addr, insecure_dev, log_format, check_config):
    """Run one node: HTTP API, Raft replication, and the wheel when master."""
    from horologe.cluster.errors import UnsupportedPysyncobjError
    from horologe.cluster.pysyncobj_contract import check_pysyncobj
    from horologe.node.config import load_config
    from horologe.node.errors import ConfigError
    from horologe.node.main import run_node

    try:
        check_pysyncobj()
    except UnsupportedPysyncobjError as e:
        raise click.ClickException(str(e)) from e
    try:
        cfg = load_config(
            config_path,
            node_id=node_id,
            data_dir=data_dir,
            http=http_addr,
            raft=raft_addr,
            insecure_dev=insecure_dev,
            log_format=log_format,
        )
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    if check_config:
        click.echo(
            f"{cfg.node_id}: {cfg.scheme} {cfg.http}, raft {cfg.raft} "
            f"(listening on {cfg.raft_bind or cfg.raft}), data {cfg.data_dir}"
        )
        if cfg.tls_cert:
            click.echo(f"  tls: certificate {cfg.tls_cert}, key {cfg.tls_key}")
        click.echo(f"  peers' certificates verified against {cfg.tls_ca or 'the system CAs'}")
        for p in cfg.peers:
            dial = p.dial or p.raft
            click.echo(f"  peer {p.node_id}: raft {p.raft} dialled at {dial}, http {cfg.http_url(p.http)}")
        return
    run_node(cfg)


@main.command("local-cluster")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 9))
@click.option(
    "--data",
    default="data/local",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where configs, data and logs go.",
)
@click.option(
    "--http-port", default=8081, show_default=True, help="First HTTP port; nodes take consecutive ones."
)
@click.option("--raft-port", default=7081, show_default=True, help="First Raft port.")
@click.option("--demo/--no-demo", default=False, help="Schedule a few messages and show them delivered.")
@click.option("--exit-after-demo", is_flag=True, help="Stop the cluster when the demo is done.")
@click.option(
    "--restart",
    type=click.Choice(["never", "on-failure"]),
    default="never",
    show_default=True,
    help="When a node dies: leave it down until a SIGHUP to local-cluster, or restart it by "
    "itself when it exited with an error or by a signal.",
)
@click.option("--restart-delay", default=3.0, show_default=True, help="Seconds before an on-failure restart.")
def local_cluster(nodes, data, http_port, raft_port, demo, exit_after_demo, restart, restart_delay) -> None:
    """Start NODES node processes on 127.0.0.1 and keep them running until Ctrl-C.

    When a node dies the others go on: it prints which one and how to bring it back
    (SIGHUP to local-cluster restarts every dead node, or --restart on-failure). Tokens and
    the cluster secret come from HOROLOGE_CLIENT_TOKEN, HOROLOGE_ADMIN_TOKEN and
    HOROLOGE_CLUSTER_SECRET when set; otherwise they are generated and printed.
    Node logs go to DATA/n<i>.log.
    """
    import signal

    from horologe import local_cluster as lc
    from horologe.client import HorologeError
    from horologe.local_supervisor import Supervisor

    env, generated = lc.secrets_env()
    configs = lc.write_configs(
        data, [http_port + i for i in range(nodes)], [raft_port + i for i in range(nodes)]
    )
    procs = lc.start(configs, env, data)
    urls = [f"http://127.0.0.1:{http_port + i}" for i in range(nodes)]
    supervisor = Supervisor(
        procs, configs, env, data, urls, restart=restart, delay_s=restart_delay, echo=click.echo
    )

    def on_signal(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, supervisor.request_restart)
    try:
        leader = lc.wait_ready(urls)
        click.echo(f"{nodes} nodes up; master is {leader}")
        for i, u in enumerate(urls, 1):
            click.echo(
                f"  n{i}  {u}   pid {procs[i - 1].pid}   raft 127.0.0.1:{raft_port + i - 1}"
                f"   log {data}/n{i}.log"
            )
        if generated:
            click.echo("dev tokens (generated; export them to reuse):")
        for name in lc.TOKEN_ENV:
            click.echo(f"  export {name}={env[name]}")
        if demo:
            lc.demo(urls[0], env["HOROLOGE_CLIENT_TOKEN"], click.echo)
        if not exit_after_demo:
            click.echo(f"running (pid {os.getpid()}, --restart {restart}); Ctrl-C stops every node")
            supervisor.run()
    except KeyboardInterrupt:
        pass
    except (TimeoutError, HorologeError, click.ClickException) as e:
        lc.stop(supervisor.procs)
        raise click.ClickException(f"{e} (see {data}/n*.log)") from e
    finally:
        click.echo("stopping nodes...")
        lc.stop(supervisor.procs)


@main.command()
@url_option
@token_option
@ca_option
@click.option("--topic", required=True)
@click.option("--body", required=True, help="Message body (text).")
@click.option("--tag", "tags", multiple=True, help="A tag; repeat for more.")
@click.option("--key", help="Producer key: a retry with the same key returns the first id.")
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
    url, token, ca, topic, body, tags, key, deliver_at, deliver_after, delay_level, max_lateness, on_late
) -> None:
    """Schedule one message; prints its id and deliver time (epoch ms)."""
    _echo_json(
        _client(url, token, ca=ca).produce(
            topic,
            body,
            tags=tags,
            key=key,
            deliver_at=_ms_or_text(deliver_at),
            deliver_after=_ms_or_text(deliver_after),
            delay_level=delay_level,
            max_lateness=_ms_or_text(max_lateness),
            on_late=on_late,
        )
    )


@main.command()
@url_option
@token_option
@ca_option
@click.option("--topic", required=True, help="Topic to consume (or %DLQ%<group>).")
@click.option("--group", required=True, help="Consumer group: its consumers share the messages.")
@click.option("--tags", default="*", show_default=True, help='Tag filter: "a||b" or "*".')
@click.option("--max", "max_messages", default=32, show_default=True, help="Messages per pull.")
@click.option("--count", type=int, help="Stop after this many messages (default: run until Ctrl-C).")
@click.option("--nack", is_flag=True, help="Nack instead of ack (exercise retries and the DLQ).")
@_sdk_errors
def consume(url, token, ca, topic, group, tags, max_messages, count, nack) -> None:
    """Print messages as they arrive, one JSON line each, and ack them."""
    import json

    client = _client(url, token, ca=ca)
    seen = 0
    try:
        while count is None or seen < count:
            batch = client.pull(topic, group, tags=tags, max=max_messages, wait_ms=5_000)
            for m in batch:
                body = m.body.decode(errors="replace")
                click.echo(
                    json.dumps(
                        {
                            "id": m.id,
                            "topic": m.topic,
                            "tags": list(m.tags),
                            "body": body,
                            "deliver_at": m.deliver_at,
                            "delivered_at": m.delivered_at,
                            "attempt": m.attempt,
                        }
                    )
                )
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
            click.argument("message_id", required=False),
            click.option("--topic", help="With --key: name the message by its producer key instead of id."),
            click.option("--key", help="Producer key (with --topic)."),
        )
    ):
        fn = option(fn)
    return fn


def _one_message(message_id, topic, key) -> None:
    if bool(message_id) == bool(topic and key):
        raise click.UsageError("give MESSAGE_ID, or --topic and --key")


@main.command()
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
    when = {"deliver_at": _ms_or_text(deliver_at), "deliver_after": _ms_or_text(deliver_after)}
    client = _client(url, token, ca=ca)
    if message_id:
        _echo_json(client.reschedule(message_id, **when))
    else:
        _echo_json(client.reschedule_key(topic, key, **when))


def _ms_or_text(value: str | None) -> int | str | None:
    """A time option as the API takes it: a number of ms, or text ("90s", ISO-8601)."""
    return int(value) if value is not None and value.isdigit() else value


@main.command()
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


@main.command()
@url_option
@token_option
@admin_option
@ca_option
@click.argument("message_id", required=False)
@_sdk_errors
def status(url, token, admin_token, ca, message_id) -> None:
    """Show MESSAGE_ID's state, or the node's status when no id is given."""
    client = _client(url, token, admin_token, ca)
    _echo_json(client.status(message_id) if message_id else client.node_status())


@main.command()
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
    f = _client(url, token, ca=ca).forecast(topic, bucket, start, end)
    if as_json:
        _echo_json(f)
        return
    import datetime as dt

    click.echo(f"{'due (UTC)':<17} {'pending':>10}   topic: {f.topic or 'all'}")
    if f.before:
        click.echo(f"{'before':<17} {f.before:>10}")
    for start_ms, count in f.buckets:
        at = dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{at:<17} {count:>10}")


@main.command()
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
            topic, start, end, limit=min(1000, limit - shown), cursor=cursor, with_body=with_body
        )
        _echo_pending(page.messages)
        shown += len(page.messages)
        cursor = page.next_cursor
        if cursor is None:
            break


def _echo_pending(messages) -> None:
    """One JSON line per pending message (``body`` or ``body_b64`` when it was asked for)."""
    import base64
    import json

    for m in messages:
        line = {"id": m.id, "deliver_at": m.deliver_at, "fires_at": m.fires_at, "tags": list(m.tags)}
        line |= {"key": m.key, "headers": m.headers}
        if m.body is not None:
            try:
                line["body"] = m.body.decode()
            except UnicodeDecodeError:
                line["body_b64"] = base64.b64encode(m.body).decode()
        click.echo(json.dumps(line))


@main.group()
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
    import base64
    import dataclasses
    import datetime as dt

    out = dataclasses.asdict(s)
    try:
        out["body"] = s.body.decode()
    except UnicodeDecodeError:
        del out["body"]
        out["body_b64"] = base64.b64encode(s.body).decode()
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
    import json

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
        start_at=_ms_or_text(start_at),
        end_at=_ms_or_text(end_at),
    )
    click.echo(json.dumps(_schedule_json(made), indent=2))


@schedule.command("list")
@url_option
@token_option
@ca_option
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON, one a line.")
@_sdk_errors
def schedule_list(url, token, ca, as_json) -> None:
    """List every schedule: name, state, cron, zone and next fire time (UTC)."""
    import json

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
        import json

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
    "was paused are skipped.",
)
_schedule_action("delete", "Delete the schedule NAME; its firings not yet delivered are cancelled.")


@main.group()
def subscription() -> None:
    """Push subscriptions: the master POSTs a group's messages, signed, to a URL of yours.

    Each push is a JSON POST with Horologe-Signature (check it with the SDK's
    verify_signature), Horologe-Message-Id and Horologe-Attempt; a 2xx acks it, anything
    else retries it at the next level, then dead-letters it. The URL's host must be in the
    master's push_allow (node config; empty by default). Delivery is at least once. See
    docs/api.md, "Push subscriptions".
    """


def _subscription_target(command):
    """The options every subscription command takes, and its TOPIC and GROUP."""
    for option in (click.argument("group"), click.argument("topic"), ca_option, token_option, url_option):
        command = option(command)
    return command


def _subscription_json(sub) -> str:
    import dataclasses
    import json

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


@main.command("release-master")
@url_option
@admin_option
@ca_option
@click.option("--to", help="Node id to hand mastership to (default: the most caught-up).")
@_sdk_errors
def release_master(url, admin_token, ca, to) -> None:
    """Make the master hand over: final sync, release marker, Raft transfer."""
    _echo_json(_client(url, None, admin_token, ca).release_master(to))


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


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError


def _when(ms: int) -> str:
    import datetime as dt

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
    from horologe.cluster.committed_reads import watermark
    from horologe.cluster.retention import plan, reclaimable
    from horologe.storage import InvalidFieldError
    from horologe.storage.hour_names import hour_name
    from horologe.storage.key_index import KEY_ENTRY
    from horologe.storage.message_json import parse_duration

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


@main.group()
def spark() -> None:
    """Batch jobs on Spark: bulk scheduling from files, audits of a node's store.

    Local mode by default (--master local[*]); any Spark master URL works. Needs the
    [spark] extra (pip install -e '.[spark]') and Java 17.
    """


def _check_certificates(urls: list[str], ca: str | None) -> None:
    """Say here that a node's certificate does not verify, not from inside a Spark task."""
    from horologe.client import CertificateError, RawClient, UnavailableError

    try:
        raw = RawClient(timeout=5.0, ca=ca)
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    with raw:
        for u in urls:
            if u.startswith("https://"):
                try:
                    raw.get(f"{u.rstrip('/')}/healthz")
                except UnavailableError:
                    pass  # a node down now may be up by then: the posting retries
                except CertificateError as e:
                    raise click.ClickException(str(e)) from e


@spark.command("schedule")
@click.argument("input_path", type=click.Path(exists=True))
@url_option
@token_option
@ca_option
@click.option(
    "--format", "fmt", type=click.Choice(["parquet", "csv", "json"]), help="Default: from the file name."
)
@click.option("--topic", help="One topic for every row ...")
@click.option("--topic-col", help="... or the column that names it.")
@click.option("--body-col", required=True, help="Column holding the body (text).")
@click.option("--tags-col", help="Column of tags: a list, or a comma-separated string.")
@click.option("--deliver-at-col", help="Column of deliver times: epoch ms or ISO-8601 with a zone.")
@click.option("--deliver-after-col", help="Column of delays: ms or 500ms / 90s / 5m / 2h / 3d.")
@click.option("--delay-level-col", help="Column of RocketMQ delay levels 1..18.")
@click.option("--key-col", help="Column of producer keys (default: a hash of the row's content).")
@click.option(
    "--rejects", default="rejects", show_default=True, help="Folder for rejected rows (JSON lines)."
)
@click.option("--batch-size", default=1000, show_default=True, help="Messages per request.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
def spark_schedule(
    input_path,
    url,
    token,
    ca,
    fmt,
    topic,
    topic_col,
    body_col,
    tags_col,
    deliver_at_col,
    deliver_after_col,
    delay_level_col,
    key_col,
    rejects,
    batch_size,
    master,
) -> None:
    """Schedule every valid row of INPUT_PATH (a file or a folder of them) as a message.

    Rows are validated first; bad ones are written to --rejects with the reason and never
    sent. Valid rows are posted from the executors with retries and per-row keys, so a
    rerun or a retried task never schedules a row twice (a key lives until 24 h after its
    message's delivery hour).
    """
    from horologe.pipeline.column_mapping import ColumnMapping
    from horologe.pipeline.errors import PipelineError
    from horologe.pipeline.schedule import run_schedule, schedule_session

    urls = [u.strip() for u in url.split(",")]
    _check_certificates(urls, ca)
    try:
        mapping = ColumnMapping(
            body_col=body_col,
            topic=topic,
            topic_col=topic_col,
            tags_col=tags_col,
            deliver_at_col=deliver_at_col,
            deliver_after_col=deliver_after_col,
            delay_level_col=delay_level_col,
            key_col=key_col,
        )
        session = schedule_session(master)
        with click.progressbar(length=1, label="posting", file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - bar.pos)

            s = run_schedule(
                session,
                input_path,
                mapping,
                urls,
                token or "",
                rejects,
                fmt=fmt,
                batch_size=batch_size,
                ca=ca,
                on_progress=progress,
            )
    except PipelineError as e:
        raise click.ClickException(str(e)) from e
    click.echo(
        f"rows {s.rows:,}: accepted {s.accepted:,}, rejected {s.rejected:,} (see {s.rejects_path}), "
        f"refused by the server {s.refused:,}; batches retried {s.retried:,}"
    )
    if s.refused:
        raise SystemExit(1)


@spark.command("audit")
@click.argument("data_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", default="audit", show_default=True, help="Folder for Parquet tables, report.md, PNGs.")
@click.option(
    "--grace-ms",
    default=60_000,
    show_default=True,
    help="How late a delivery may be before it counts as missing.",
)
@click.option("--days", default=7, show_default=True, help="Backlog forecast horizon.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
def spark_audit(data_dir, out, grace_ms, days, master) -> None:
    """Audit one node's DATA_DIR (safe while it runs): lateness per minute, duplicates,
    missing deliveries, cancels, backlog per hour ahead, tags."""
    from horologe.pipeline.audit import run_audit
    from horologe.pipeline.spark_session import spark_session
    from horologe.storage import StorageError

    try:
        r = run_audit(spark_session(master, "horologe-audit"), data_dir, out, grace_ms=grace_ms, days=days)
    except StorageError as e:
        raise click.ClickException(str(e)) from e
    click.echo(
        f"{r.messages:,} messages, {r.deliveries:,} deliveries; duplicates {r.duplicated_messages:,}, "
        f"missing {len(r.missing):,}, cancelled {r.cancelled:,}; report: {out}/report.md"
    )
