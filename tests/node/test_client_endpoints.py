"""The SDK follows a 307 only to hosts it was given: the token never goes elsewhere."""

from __future__ import annotations

import pytest

from horologe.client.calls import Endpoints
from horologe.client.errors import UnavailableError


def test_a_redirect_to_another_port_of_a_given_host_is_followed():
    e = Endpoints(["http://127.0.0.1:8081"])
    assert e.redirected("http://127.0.0.1:8083/v1/messages") == "http://127.0.0.1:8083"
    assert e.order()[0] == "http://127.0.0.1:8083"


@pytest.mark.parametrize("location", ["http://evil.example:8083/v1/messages", "https://127.0.0.1:8083/x"])
def test_a_redirect_elsewhere_is_refused(location):
    e = Endpoints(["http://127.0.0.1:8081", "http://127.0.0.2:8081"])
    with pytest.raises(UnavailableError, match="not among the nodes given"):
        e.redirected(location)
    assert e.master is None and len(e.urls) == 2
