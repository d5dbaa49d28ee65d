"""Options and arguments of the message and schedule commands, refused before any request is sent."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from horologe.cli import main

SECONDS = "1796160000"  # 2026-12-01T...Z in epoch seconds; as epoch ms, 1970-01-21


@pytest.mark.parametrize(
    "args, option",
    [
        (["produce", "--topic", "t", "--body", "b", "--at", SECONDS], "--at"),
        (["reschedule", "0000000100000001", "--at", SECONDS], "--at"),
        (["pending", "--topic", "t", "--from", SECONDS], "--from"),
        (["forecast", "--to", SECONDS], "--to"),
        (
            [
                "schedule",
                "create",
                "s",
                "--topic",
                "t",
                "--cron",
                "* * * * *",
                "--body",
                "b",
                "--end-at",
                SECONDS,
            ],
            "--end-at",
        ),
    ],
)
def test_epoch_seconds_where_epoch_ms_are_taken_are_refused(args, option):
    """Taken for epoch ms, they named a time in 1970, and the message was delivered at once."""
    # a URL nothing listens on: a request sent would fail otherwise, and slowly
    r = CliRunner().invoke(main, [*args, "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2, r.output
    assert (
        f"Invalid value for {option}: {SECONDS} looks like epoch seconds; give epoch ms ({SECONDS}000)"
        in r.output
    )


@pytest.mark.parametrize("command", [["status"], ["cancel"], ["reschedule", "--after", "1m"]])
def test_a_malformed_message_id_is_said_to_be_one(command):
    """It went out and came back 404 "Not Found: GET /v1/messages/xyz" (the route did not match)."""
    r = CliRunner().invoke(main, [*command, "xyz", "--url", "http://127.0.0.1:9"])
    assert r.exit_code == 2, r.output
    assert "'xyz' is not a message id: 16 hex digits, as produce prints it" in r.output


def test_an_id_and_a_key_together_are_refused_and_so_is_half_a_key():
    for args, why in (
        (["0000000100000001", "--topic", "t"], "give MESSAGE_ID, or --topic and --key: not both"),
        (
            ["0000000100000001", "--topic", "t", "--key", "k"],
            "give MESSAGE_ID, or --topic and --key: not both",
        ),
        (["--topic", "t"], "give MESSAGE_ID, or --topic and --key"),
    ):
        r = CliRunner().invoke(main, ["cancel", *args, "--url", "http://127.0.0.1:9"])
        assert r.exit_code == 2 and why in r.output, r.output


def test_a_cluster_that_does_not_answer_is_said_to_be_tried_again_at_once():
    """It was the SDK's 15 s of retries in silence, then the error."""
    args = ["--retry-for", "0.5", "produce", "--topic", "t", "--body", "b", "--url", "http://127.0.0.1:9"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1
    said = r.stderr.splitlines()
    assert said[0].startswith("http://127.0.0.1:9: ") and said[0].endswith("trying again for up to 0 s..."), (
        said
    )
    assert said[-1].endswith("(is the cluster running, and at --url / HOROLOGE_URL?)"), said


def test_how_long_a_command_tries_is_the_root_option_or_its_variable(monkeypatch):
    """It was the SDK's 15 s, with no way to shorten it from the command line."""
    from horologe.cli import _common

    made = []
    monkeypatch.setattr(_common, "Client", lambda *a, **kw: made.append(kw["retry_s"]) or 1 / 0)
    status = ["status", "--url", "http://127.0.0.1:9"]
    CliRunner().invoke(main, status, env={"HOROLOGE_RETRY_FOR": None})  # the default
    CliRunner().invoke(main, ["--retry-for", "0", *status])
    CliRunner().invoke(main, status, env={"HOROLOGE_RETRY_FOR": "2.5"})
    assert made == [15.0, 0.0, 2.5]
    r = CliRunner().invoke(main, ["--retry-for", "-1", *status])
    assert r.exit_code == 2 and "--retry-for" in r.output, r.output
