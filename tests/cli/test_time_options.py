"""Time options of the message and schedule commands, refused before any request is sent."""

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
