"""The edge's table of statuses for domain refusals (node/http/errors.py), as clients read it."""

from __future__ import annotations

from horologe.client.calls import REFUSED_503
from horologe.client.errors import UnavailableError, error_for
from horologe.node import errors as node
from horologe.node.http.errors import ApiError


def test_a_write_committed_that_this_node_failed_to_apply_is_retried_under_its_key():
    """The entry is on a majority and the other nodes apply it; this master halted. A 500
    was raised at once by the SDK, and the user's own retry (new keys) stored it twice: a
    503 that may have applied is retried under the same key, on the next master."""
    answer = ApiError.of(node.ApplyFailed("StorageFullError: no room"))
    assert answer.status == 503 and answer.code == "apply_failed"
    assert answer.code not in REFUSED_503  # not resent where resending is unsafe
    assert isinstance(error_for(answer.status, answer.body()), UnavailableError)
