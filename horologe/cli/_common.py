"""What several command modules share: the connection options, the SDK client, JSON output."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import re

import click

from horologe.client import AuthError, Client, HorologeError, UnavailableError
from horologe.client.calls import node_urls
from horologe.storage.message_id import ID_PATTERN

DEFAULT_URL = "http://127.0.0.1:8081"
url_option = click.option(
    "--url",
    default=DEFAULT_URL,
    show_default=True,
    envvar="HOROLOGE_URL",
    show_envvar=True,
    help="Node URLs, comma-separated: http://host:port, or https://host:port for nodes "
    "serving TLS (writes are redirected to the master).",
)
token_option = click.option("--token", envvar="HOROLOGE_CLIENT_TOKEN", show_envvar=True, help="Client token.")
admin_option = click.option(
    "--admin-token",
    envvar="HOROLOGE_ADMIN_TOKEN",
    show_envvar=True,
    help="Admin token (status, cluster, release).",
)
ca_option = click.option(
    "--ca",
    envvar="HOROLOGE_CA",
    show_envvar=True,
    type=click.Path(exists=True, readable=True),
    help="For https:// URLs: PEM file (or directory) of the CA that signed the nodes' "
    "certificates. Default: certifi's bundle, or SSL_CERT_FILE's. Certificates are always verified.",
)


def _message_id(_ctx, _param, value: str | None) -> str | None:
    """MESSAGE_ID as the API names it (lower case), or a usage error that says what one is."""
    if value is None:
        return None
    if not re.fullmatch(ID_PATTERN, value.lower()):
        raise click.BadParameter(f"{value!r} is not a message id: 16 hex digits, as produce prints it")
    return value.lower()


message_id_argument = click.argument("message_id", required=False, callback=_message_id)


class _SaidOnStderr(logging.Handler):
    """The SDK's word that a call is being tried again (no node answered yet), shown as it
    happens: else an unreachable cluster is 15 s of silence, then the error."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"{self.format(record)}...", err=True)


def retry_for() -> float:
    """`horologe --retry-for S` (the root command's option); 15 s, the SDK's, when run without it."""
    root = click.get_current_context(silent=True)
    return root.find_root().params.get("retry_for", 15.0) if root else 15.0


def _client(url: str, token: str | None, admin_token: str | None = None, ca: str | None = None) -> Client:
    retries = logging.getLogger("horologe.client.calls")
    if not any(isinstance(h, _SaidOnStderr) for h in retries.handlers):
        retries.setLevel(logging.INFO)
        retries.addHandler(_SaidOnStderr())
    try:
        return Client(node_urls(url), token or "", admin_token=admin_token, ca=ca, retry_s=retry_for())
    except ValueError as e:  # a URL, a token or a CA file the client cannot use
        raise click.UsageError(str(e)) from e


def utc_time(ms: int) -> str:
    """An epoch-ms time as ISO 8601 in UTC, to the second."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")


def _echo_json(obj) -> None:
    click.echo(json.dumps(dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj, indent=2))


def _sdk_errors(fn):
    """Turn SDK errors into one-line CLI errors (exit 1)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AuthError as e:
            hint = "the client token: --token or HOROLOGE_CLIENT_TOKEN; the admin API's: --admin-token"
            raise click.ClickException(f"{e} ({hint} or HOROLOGE_ADMIN_TOKEN)") from e
        except UnavailableError as e:
            hints = []
            if "may or may not have applied" not in str(e):  # else it was sent: the answer is what is missing
                hints.append("is the cluster running, and at --url / HOROLOGE_URL?")
            if "closed the connection without an answer" in str(e) and "http://" in str(e):
                hints.append("A node serving HTTPS closes plain HTTP unanswered: give its URL as https://")
            raise click.ClickException(f"{e} ({' '.join(hints)})" if hints else str(e)) from e
        except HorologeError as e:
            raise click.ClickException(str(e)) from e

    return wrapper


def _ms_or_text(value: str | None) -> int | str | None:
    """A time option as the API takes it: a number of ms, or text ("90s", ISO-8601)."""
    return int(value) if value is not None and value.isdigit() else value


def _instant(value: str | None, option: str) -> int | str | None:
    """A point in time as the API takes it: epoch ms, or ISO-8601 text. A number that reads
    as epoch seconds (the years 2001 to 5138) is refused rather than taken for epoch ms
    of 1970 to 1973, which would deliver at once."""
    at = _ms_or_text(value)
    if isinstance(at, int) and 10**9 <= at < 10**11:
        why = f"{value} looks like epoch seconds; give epoch ms ({at * 1000}) or ISO-8601"
        raise click.BadParameter(why, param_hint=option)
    return at
