"""The background acker (horologe/client/acker.py): gathered acks, flush, close."""

from __future__ import annotations

import threading

from horologe.client.acker import Acker


class Recorded:
    """A client whose acks are recorded (Client.ack's signature)."""

    def __init__(self) -> None:
        self.acked: list[tuple[str, str, list[str]]] = []

    def ack(self, topic, group, receipts):
        self.acked.append((topic, group, list(receipts)))
        return len(receipts)


def test_closed_twice_or_flushed_once_closed_it_returns_at_once():
    """kombu closes a channel twice on Celery's reconnect (connection.collect, then close):
    the second close flushed an acker whose thread had ended, and waited out its timeout
    (10 s a reconnect; for ever with none)."""
    client = Recorded()
    acker = Acker(client)
    acker.ack("t", "g", "r1")
    acker.close()
    assert client.acked == [("t", "g", ["r1"])]
    done = threading.Thread(target=lambda: (acker.close(None), acker.flush(None)), daemon=True)
    done.start()
    done.join(5)
    assert not done.is_alive()
