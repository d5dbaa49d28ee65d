"""The CLI's one-line errors for what the SDK raises (horologe/cli/_common.py)."""

from __future__ import annotations

import click
import pytest

from horologe.cli._common import _sdk_errors
from horologe.client import UnavailableError


def _raising(error: Exception):
    @_sdk_errors
    def command() -> None:
        raise error

    return command


@pytest.mark.parametrize("sent", [False, True])
def test_plain_http_closed_unanswered_says_the_node_may_serve_https(sent):
    """A node serving HTTPS closes plain HTTP unanswered; a call not to be resent (a
    membership change, a release) then also says it may or may not have applied."""
    text = "http://n1:8080: the node closed the connection without an answer"
    text += "; the call may or may not have applied" if sent else ""
    with pytest.raises(click.ClickException) as e:
        _raising(UnavailableError(text))()
    assert "give its URL as https://" in e.value.message
    assert ("is the cluster running" in e.value.message) is not sent


def test_a_call_that_may_have_applied_is_not_told_to_look_for_the_cluster():
    with pytest.raises(click.ClickException) as e:
        _raising(UnavailableError("http://n1:8080: timed out; the call may or may not have applied"))()
    assert e.value.message == "http://n1:8080: timed out; the call may or may not have applied"
