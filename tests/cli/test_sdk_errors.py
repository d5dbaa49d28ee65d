"""The CLI's one-line errors for what the SDK raises (horologe/cli/_common.py)."""

from __future__ import annotations

import os

import click
import pytest
from click.testing import CliRunner

from horologe.cli import main
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


@pytest.mark.parametrize("url", ["http://127.0.0.1:80a1", "http://[::1", "ftp://127.0.0.1:8081"])
@pytest.mark.parametrize("command", [["status"], ["backup", "--to", "unused"]])
def test_a_url_that_names_no_node_is_a_usage_error_not_a_traceback(tmp_path, url, command):
    args = [*command[:-1], str(tmp_path / "b")] if command[0] == "backup" else command
    r = CliRunner().invoke(main, [*args, "--url", url], env={"HOROLOGE_CLIENT_TOKEN": "t"})
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and url in r.output
    assert not os.path.exists(tmp_path / "b")


def test_a_ca_file_without_a_certificate_is_a_usage_error_not_a_traceback(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    r = CliRunner().invoke(
        main, ["backup", "--url", "https://127.0.0.1:9", "--ca", str(ca), "--to", str(tmp_path / "b")]
    )
    assert r.exit_code == 2, r.output
    assert "holds no usable CA certificate" in r.output
