"""The push bench's receiver, a process of its own: what it stamps, counts and hands back."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from bench.edge.push_delivery import SECRET, Receiver
from horologe.node.push.signature import SIGNATURE_HEADER, signature


def _push(url: str, mid: str, deliver_at: int, secret: str = SECRET) -> int:
    body = json.dumps({"id": mid, "deliver_at": deliver_at}).encode()
    headers = {SIGNATURE_HEADER: signature(secret, int(time.time()), body)}
    return httpx.post(url, content=body, headers=headers, timeout=10).status_code


def test_it_stops_at_the_expected_ids_and_hands_back_each_signed_push(tmp_path):
    receiver = Receiver(2, str(tmp_path / "pushes.jsonl")).start()
    try:
        before = time.time() * 1000
        assert _push(receiver.url, "m1", 111) == 200
        assert _push(receiver.url, "m1", 111) == 200  # sent again: counted, not a new id
        assert _push(receiver.url, "m2", 222, secret="another-secret") == 401
        assert _push(receiver.url, "m2", 222) == 200
        receiver.wait(10)
    finally:
        receiver.stop()
    assert [(mid, at) for _, mid, at in receiver.got] == [("m1", 111), ("m1", 111), ("m2", 222)]
    arrivals = [at for at, _, _ in receiver.got]
    assert before <= arrivals[0] <= arrivals[1] <= arrivals[2] <= time.time() * 1000
    assert receiver.all_at == arrivals[2]  # when the second distinct id came
    assert receiver.unsigned == 1


def test_a_receiver_short_of_its_ids_times_out_with_what_it_has(tmp_path):
    receiver = Receiver(3, str(tmp_path / "pushes.jsonl")).start()
    try:
        assert _push(receiver.url, "m1", 111) == 200
        with pytest.raises(TimeoutError, match="1 of 3 pushes"):
            receiver.wait(0.5)
    finally:
        receiver.stop()
    assert [mid for _, mid, _ in receiver.got] == ["m1"]
    assert receiver.all_at is None
