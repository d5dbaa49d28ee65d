"""The client's copy of what one request may carry (horologe/client/limits.py) is the
API's: a pull, an ack or an extend split to fit a smaller limit than the node's would take
more calls than needed, and one split to fit a larger limit would be refused."""

from horologe.client import limits
from horologe.node.http.rules import messages, queries


def test_the_clients_limits_are_the_apis():
    assert limits.MAX_ITEMS == messages.MAX_PULL
    assert limits.MAX_PENDING_PAGE == queries.MAX_PENDING_PAGE
    assert limits.MAX_WAIT_MS == messages.MAX_WAIT_MS
    assert limits.MAX_AHEAD_MS == messages.MAX_AHEAD_MS
    assert (limits.MIN_VISIBILITY_MS, limits.MAX_VISIBILITY_MS) == (
        messages.MIN_VISIBILITY_MS,
        messages.MAX_VISIBILITY_MS,
    )
