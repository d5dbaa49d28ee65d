"""``horologe schedule ...`` against a stand-in node (httpx's MockTransport)."""

from __future__ import annotations

import json

import httpx
import orjson
import pytest
from click.testing import CliRunner

from horologe import cli
from horologe.cli import schedules
from horologe.client import Client

SCHEDULE = {
    "name": "nightly",
    "topic": "reports",
    "cron": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "state": "active",
    "body": "run",
    "tags": [],
    "headers": {"team": "ops"},
    "start_at": None,
    "end_at": None,
    "created_at": 5,
    "planned_until": 5,
    "next_fires": [1_767_229_200_000],
}


@pytest.fixture
def sent(monkeypatch) -> list:
    calls: list = []

    def node(request: httpx.Request) -> httpx.Response:
        calls.append(
            (request.method, request.url.path, orjson.loads(request.content) if request.content else None)
        )
        if "/missing" in request.url.path:
            return httpx.Response(
                404, json={"error": {"code": "not_found", "message": "no schedule named 'missing'"}}
            )
        if request.url.path == "/v1/schedules" and request.method == "GET":
            return httpx.Response(200, json={"schedules": [SCHEDULE]})
        return httpx.Response(
            200, json={"name": "nightly", "state": "deleted"} if request.method == "DELETE" else SCHEDULE
        )

    def client(url, token, admin_token=None, ca=None):
        return Client([url], token or "", transport=httpx.MockTransport(node), retry_s=0)

    monkeypatch.setattr(schedules, "_client", client)
    return calls


def run(*args: str):
    return CliRunner().invoke(cli.main, ["schedule", *args])


def test_create_sends_the_schedule_and_prints_it(sent):
    out = run(
        "create", "nightly", "--topic", "reports", "--cron", "0 2 * * *", "--tz", "Europe/Berlin",
        "--body", "run", "--header", "team=ops", "--start-at", "1767225600000",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert sent == [
        (
            "POST",
            "/v1/schedules",
            {
                "name": "nightly",
                "topic": "reports",
                "cron": "0 2 * * *",
                "timezone": "Europe/Berlin",
                "body": "run",
                "headers": {"team": "ops"},
                "start_at": 1_767_225_600_000,
            },
        )
    ]
    shown = json.loads(out.output)
    assert shown["next_fires_utc"] == ["2026-01-01T01:00:00+00:00"] and shown["body"] == "run"


def test_list_get_pause_resume_delete(sent):
    listed = run("list")
    assert listed.exit_code == 0 and "nightly" in listed.output and "2026-01-01T01:00:00" in listed.output
    for verb in ("get", "pause", "resume", "delete"):
        assert run(verb, "nightly").exit_code == 0
    assert [(m, p) for m, p, _ in sent] == [
        ("GET", "/v1/schedules"),
        ("GET", "/v1/schedules/nightly"),
        ("POST", "/v1/schedules/nightly/pause"),
        ("POST", "/v1/schedules/nightly/resume"),
        ("DELETE", "/v1/schedules/nightly"),
    ]


def test_errors_are_one_line(sent):
    out = run("pause", "missing")
    assert out.exit_code == 1 and "not_found" in out.output
    bad = run("create", "x", "--topic", "t", "--cron", "* * * * *", "--body", "b", "--header", "novalue")
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.output


def test_help_says_what_each_command_does():
    out = CliRunner().invoke(cli.main, ["schedule", "--help"])
    assert out.exit_code == 0
    for verb in ("create", "list", "get", "pause", "resume", "delete"):
        assert verb in out.output
    assert "first occurrence" in out.output


def test_a_schedule_made_ended_is_warned_of(monkeypatch):
    """``--end-at`` in the past made a schedule that never fires, with exit 0 and no word."""

    def node(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={**SCHEDULE, "state": "ended", "end_at": 1, "next_fires": []})

    def client(url, token, admin_token=None, ca=None):
        return Client([url], token or "", transport=httpx.MockTransport(node), retry_s=0)

    monkeypatch.setattr(schedules, "_client", client)
    r = CliRunner().invoke(
        cli.main,
        [
            "schedule",
            "create",
            "nightly",
            "--topic",
            "t",
            "--cron",
            "0 2 * * *",
            "--body",
            "b",
            "--end-at",
            "1",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "warning: nightly has ended already (--end-at is past): it will never fire" in r.stderr
