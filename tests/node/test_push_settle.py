"""Ended pushes gathered for settling (node/push/settle.py): one ack for every success,
one nack per Retry-After, and nothing left behind once taken."""

from __future__ import annotations

from horologe.node.push.sender import Sent
from horologe.node.push.settle import Ended


def test_successes_share_an_ack_and_failures_a_nack_per_retry_after():
    ended = Ended()
    ended.add("r1", Sent(True, 200, None))
    ended.add("r2", Sent(False, 500, None))
    ended.add("r3", Sent(True, 204, None))
    ended.add("r4", Sent(False, 429, 3000))
    ended.add("r5", Sent(False, None, None, "no answer within 100 ms"))
    ended.add("r6", Sent(False, 503, 3000))
    batch = ended.take()
    assert batch.acks == ["r1", "r3"]
    assert dict(batch.nacks) == {None: ["r2", "r5"], 3000: ["r4", "r6"]}
    assert batch.count == 6
    assert ended.count == 0 and not ended.acks and not ended.nacks
    ended.add("r7", Sent(True, 200, None))
    assert ended.take().acks == ["r7"] and batch.acks == ["r1", "r3"]  # the first batch untouched
