"""A node's role as the SDK and the CLI read it from ``/admin/status``, on httpx's MockTransport.

Nodes say ``master``, ``follower`` or ``candidate``; ``slave``, the word nodes used for a
follower before, reads as ``follower`` (accepted for one release: docs/api.md).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from click.testing import CliRunner

from horologe import cli
from horologe import client as sdk
from horologe.cli import admin
from horologe.client import AsyncClient, Client

URL = "http://127.0.0.1:8081"


def node_saying(role: str):
    def node(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/admin/status"
        return httpx.Response(200, json={"node_id": "n1", "role": role, "leader": "n2"})

    return httpx.MockTransport(node)


@pytest.mark.parametrize(
    "answered, read", [("slave", "follower"), ("follower", "follower"), ("master", "master")]
)
def test_the_sync_and_async_clients_read_a_followers_role_as_follower(answered, read):
    with Client([URL], "t", transport=node_saying(answered), retry_s=0) as c:
        assert c.node_status() == {"node_id": "n1", "role": read, "leader": "n2"}

    async def run():
        async with AsyncClient([URL], "t", transport=node_saying(answered), retry_s=0) as c:
            return await c.node_status()

    assert asyncio.run(run())["role"] == read


def test_node_role_maps_only_the_old_word():
    assert [sdk.node_role(r) for r in ("master", "follower", "candidate", "slave")] == [
        "master",
        "follower",
        "candidate",
        "follower",
    ]


def test_the_cli_prints_follower_for_a_node_that_says_slave(monkeypatch):
    def client(url, token, admin_token=None, ca=None):
        return Client([url], token or "", transport=node_saying("slave"), retry_s=0)

    monkeypatch.setattr(admin, "_client", client)
    out = CliRunner().invoke(cli.main, ["status", "--url", URL, "--admin-token", "a"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["role"] == "follower"
