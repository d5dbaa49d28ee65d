"""The Raft port of a node answers only peers that hold the cluster secret (DESIGN §5,
"Security"): pysyncobj unpickles what a peer sends, so without the secret a raw
connection could run code. Here one sends what an attacker would, the node runs none of
it, and the cluster goes on serving."""

from __future__ import annotations

import base64
import hashlib
import os
import pickle
import socket
import struct
import time
import zlib

from cryptography.fernet import Fernet

from horologe.cluster.raft.wire import RaftCipher


class _Touch:
    """Unpickling this creates a file: the proof that a payload ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _frames(marker: str) -> list[bytes]:
    evil = pickle.dumps(("n9", _Touch(marker)), protocol=4)
    wrong_key = base64.urlsafe_b64encode(hashlib.sha256(b"not the cluster secret").digest())
    payloads = [
        os.urandom(4096),  # garbage
        evil,  # a bare pickle
        zlib.compress(evil),  # as pysyncobj frames one, but unencrypted
        Fernet(wrong_key).encrypt(zlib.compress(evil)),  # pysyncobj's frame, with another secret
        RaftCipher.from_secret("not the cluster secret").seal(evil),  # ours, with another secret
    ]
    return [struct.pack("<i", len(p)) + p for p in payloads]


def test_a_peer_without_the_cluster_secret_runs_nothing_and_stops_nothing(cluster, tmp_path):
    master = cluster.wait_connected()
    term = cluster.status(master)["term"]
    marker = str(tmp_path / "ran")
    for i in cluster.indexes:
        for frame in _frames(marker):
            with socket.create_connection(("127.0.0.1", cluster.raft_ports[i]), timeout=5) as s:
                s.sendall(frame)
                s.settimeout(2)
                try:
                    while s.recv(65536):  # until the node drops the connection
                        pass
                except (TimeoutError, ConnectionResetError):
                    pass
    time.sleep(0.5)
    assert not os.path.exists(marker), "a node unpickled a payload from a peer without the secret"
    said = "dropped a Raft connection from 127.0.0.1:"
    assert said in cluster.log(master) and "is cluster_secret the same there?" in cluster.log(master)
    assert cluster.wait_connected() == master
    assert {cluster.status(i)["term"] for i in cluster.indexes} == {term}
    res = cluster.produce(master, [{"topic": "after", "body": "still serving"}])
    assert "id" in res[0], res


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_frame_claiming_a_gibibyte_is_refused_before_it_is_buffered(cluster):
    """Without the secret nothing can be decrypted, but pysyncobj would buffer the whole
    frame its header claims first (cluster/raft/bounded_frames.py)."""
    master = cluster.wait_connected()
    pid = cluster.procs[master].pid
    before = _rss_kb(pid)
    sent, dropped = 0, False
    chunk = b"\0" * (1 << 20)
    deadline = time.monotonic() + 10
    with socket.create_connection(("127.0.0.1", cluster.raft_ports[master]), timeout=5) as s:
        me = ":".join(map(str, s.getsockname()[:2]))  # the log names who to look at
        s.settimeout(1)
        s.sendall(struct.pack("<i", (1 << 30) - 1))
        try:
            while sent < 256 << 20 and time.monotonic() < deadline:
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            dropped = True
        except TimeoutError:
            pass  # the node reads ever slower (pysyncobj grows its buffer by copying): not dropped
    assert dropped, f"the node kept reading a frame it can never decrypt ({sent >> 20} MiB sent)"
    assert _rss_kb(pid) - before < 64 * 1024
    assert f"dropped a Raft connection from {me}: a frame claims 1073741823 bytes" in cluster.log(master)
    assert {cluster.status(i)["term"] for i in cluster.indexes} == {cluster.status(master)["term"]}


def test_a_node_with_another_secret_says_so_itself(make_cluster):
    """A node started with another secret dials its peers (pysyncobj dials the members
    whose address sorts below its own), and each drops the connection at its handshake.
    The peers logged why; the node itself logged nothing, though it is the one to fix."""
    c = make_cluster(start=False)
    odd = max(c.indexes, key=lambda i: f"127.0.0.1:{c.raft_ports[i]}")  # it dials both others
    c.env = {odd: {"HOROLOGE_CLUSTER_SECRET": "not the cluster secret"}}
    for i in c.indexes:
        c.start(i)
    c.wait_leader([i for i in c.indexes if i != odd])
    deadline = time.monotonic() + 20
    while "ended before the peer answered their handshake" not in c.log(odd):
        assert time.monotonic() < deadline, c.log(odd)[-3000:]
        time.sleep(0.2)
    assert "is cluster_secret the same on both nodes" in c.log(odd)
