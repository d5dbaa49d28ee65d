"""The background acker (horologe/client/acker.py): gathered acks, flush, close."""

from __future__ import annotations

import threading

from horologe.client.acker import Acker
from horologe.client.errors import NotFoundError, UnavailableError
from testkit.waiting import wait_until


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


class Failing(Recorded):
    """A client whose acks raise ``error`` until ``up`` is set."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error, self.tries, self.up = error, 0, False

    def ack(self, topic, group, receipts):
        self.tries += 1
        if not self.up:
            raise self.error
        return super().ack(topic, group, receipts)


def test_an_ack_no_node_took_is_sent_again_and_settled_once_taken(monkeypatch):
    monkeypatch.setattr("horologe.client.acker.RESEND_S", 0.01)
    client = Failing(UnavailableError("no node answered"))
    settled = []
    acker = Acker(client, lambda *ack: settled.append(ack))
    acker.ack("t", "g", "r1")
    wait_until(lambda: client.tries >= 3, 5)  # sent again, and again
    assert settled == []  # kept, its lease still renewed
    client.up = True
    acker.close()
    assert client.acked == [("t", "g", ["r1"])]
    assert settled == [("t", "g", ["r1"])]


def test_an_ack_the_cluster_refused_is_settled_and_not_sent_again():
    client = Failing(NotFoundError("no such topic"))
    settled = []
    acker = Acker(client, lambda *ack: settled.append(ack))
    acker.ack("t", "g", "r1")
    acker.close()
    assert (client.tries, client.acked) == (1, [])
    assert settled == [("t", "g", ["r1"])]


def test_acks_kept_are_sent_again_every_resend_s_not_with_every_new_ack(monkeypatch):
    """Each call that no node takes waits the client's retry_s: kept acks sent again with
    every new one held each new ack's call as long again, and a flush as many times."""
    monkeypatch.setattr("horologe.client.acker.RESEND_S", 60.0)
    client = Failing(UnavailableError("no node answered"))
    acker = Acker(client)
    acker.ack("t", "g", "r1")
    acker.flush(5)
    acker.ack("t", "h", "r2")  # another group's: a call of its own
    acker.flush(5)
    assert client.tries == 2  # r1 once, r2 once: r1 waits for its minute
    client.up = True
    acker.close()
    assert client.acked == [("t", "g", ["r1"]), ("t", "h", ["r2"])]  # sent once more as it closes


def test_an_ack_call_that_fails_unexpectedly_is_settled_and_the_acks_after_it_are_sent():
    """A call that raised other than a HorologeError (the client closed under the acker as a
    worker shut down, a bug) ended the acker's thread: every later ack was queued to nothing,
    and the lease keeper renewed those messages' leases for as long as the worker ran."""
    client = Failing(RuntimeError("cannot send a request: the client has been closed"))
    settled = []
    acker = Acker(client, lambda *ack: settled.append(ack))
    acker.ack("t", "g", "r1")
    acker.flush(5)
    assert settled == [("t", "g", ["r1"])]  # no longer renewed: handed out again after its lease
    client.up = True
    acker.ack("t", "g", "r2")
    acker.close()
    assert client.acked == [("t", "g", ["r2"])]
    assert settled == [("t", "g", ["r1"]), ("t", "g", ["r2"])]
