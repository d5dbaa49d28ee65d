"""Fixtures shared by the chaos tests."""

from __future__ import annotations

import pytest

from .toxiproxy_server import launch


@pytest.fixture(scope="module")
def toxiproxy(tmp_path_factory):
    """A toxiproxy server (``TOXIPROXY_URL``, a binary on PATH, or the stand-in) for the module."""
    server = launch(str(tmp_path_factory.mktemp("toxiproxy") / "toxiproxy.log"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(toxiproxy):
    """The real ``toxiproxy-python`` client, pointed at that server."""
    return toxiproxy.client
