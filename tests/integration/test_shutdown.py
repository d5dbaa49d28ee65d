"""A graceful stop finishes whatever signals follow the first: the store is closed at a
sync point, so the next start replays nothing (storage/commit_journal.py)."""

from __future__ import annotations

import os
import select
import signal
import socket
import time

import orjson

from horologe.storage import Storage
from testkit.process_cluster import CLIENT
from testkit.waiting import wait_until

HOLD_TRIES = 5
ANSWER_WAIT_S = 0.3  # a request the master refuses (503) is answered well within this


def held_request(cluster, master: int, body: bytes) -> socket.socket | None:
    """A produce to ``master`` whose body is still coming: under way, not answered. None if
    the master answered it at once: a 503 while its read lease had lapsed (a slow fsync on
    a loaded disk), and then no request is in flight to hold the stop open."""
    held = socket.create_connection(("127.0.0.1", cluster.http_ports[master]))
    held.sendall(
        b"POST /v1/messages/batch HTTP/1.1\r\nHost: node\r\n"
        + f"Authorization: Bearer {CLIENT}\r\nContent-Type: application/json\r\n".encode()
        + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
    )
    got = held.recv(4096)
    assert got.startswith(b"HTTP/1.1 100 Continue"), got
    held.sendall(body[:10])
    answered, _, _ = select.select([held], [], [], ANSWER_WAIT_S)
    if answered or got.count(b"HTTP/1.1 ") > 1:
        held.close()
        return None
    return held


def test_a_second_sigterm_does_not_cut_a_graceful_stop_short(cluster):
    master = cluster.wait_connected()
    far = int(time.time() * 1000) + 86_400_000
    cluster.produce(master, [{"topic": "t", "body": f"{k}", "deliver_at": far + k} for k in range(50)])
    # The second signal must come once the node has handled the first: two that arrive
    # before the node's main thread runs its handler are one (the kernel keeps a signal
    # pending once; CPython calls a handler once per wake). So a request whose body is
    # still coming holds the stop open (the node waits for requests in flight), and the
    # second SIGTERM goes once the first has visibly started the stop.
    body = orjson.dumps({"messages": [{"topic": "t", "body": "late", "deliver_at": far}]})
    for _ in range(HOLD_TRIES):
        held = held_request(cluster, master, body)
        if held is not None:
            break
        time.sleep(ANSWER_WAIT_S)  # a lapse lasts a round trip past the stall: wait it out
        master = cluster.wait_connected()
    else:
        raise AssertionError(f"no request was held open in {HOLD_TRIES} tries")
    p = cluster.procs[master]
    with held:
        p.send_signal(signal.SIGTERM)
        wait_until(lambda: "released mastership on shutdown" in cluster.log(master), 4.0)
        assert p.poll() is None, "the stop did not wait for the request in flight"
        p.send_signal(signal.SIGTERM)
        wait_until(lambda: "already stopping (SIGTERM ignored)" in cluster.log(master), 4.0)
    # Closed, the request ends (aiohttp reads nothing more of a connection once stopping).
    assert p.wait(20) == 0, "the master did not stop cleanly"
    # Writable, as the node opens it: nothing to go back over, nothing to replay.
    with Storage(os.path.join(cluster.data_root, f"n{master + 1}", "store")) as s:
        assert s.recovered == [] and s.applied_index > 0


def test_a_follower_says_when_it_stops_and_when_it_stopped(cluster):
    """Only a master said anything of a stop (its release): a follower's log ended silent."""
    master = cluster.wait_connected()
    follower = next(i for i in cluster.indexes if i != master)
    p = cluster.procs[follower]
    p.send_signal(signal.SIGTERM)
    assert p.wait(20) == 0
    said = cluster.log(follower)
    assert "SIGTERM: stopping" in said and said.rstrip().endswith("stopped"), said[-500:]
