"""Raft frames (cluster/raft/wire.py): what one process seals, a peer with the same
secret opens; anything else drops the connection without being unpickled."""

from __future__ import annotations

import pickle
import socket

import pytest
from pysyncobj.poller import createPoller

from horologe.cluster.raft.wire import HEAD, RaftCipher, RefusedFrame, WireConnection


@pytest.fixture(scope="module")
def ciphers() -> tuple[RaftCipher, RaftCipher, RaftCipher]:
    """Two processes of one cluster, and one with another secret."""
    return RaftCipher.from_secret("s3cret"), RaftCipher.from_secret("s3cret"), RaftCipher.from_secret("other")


def test_a_peer_opens_what_a_process_seals_and_counters_rise(ciphers):
    a, b, _ = ciphers
    first, second = a.seal(b"one"), a.seal(b"two")
    assert b.open(first)[1] == b"one" and b.open(second)[1] == b"two"
    assert b.open(first)[0] < b.open(second)[0]
    assert a.open(b.seal(b"back"))[1] == b"back"


def test_another_secret_an_altered_byte_or_another_format_is_refused(ciphers):
    a, b, other = ciphers
    frame = a.seal(b"payload")
    assert b.open(frame)[1] == b"payload"
    with pytest.raises(RefusedFrame):
        other.open(frame)
    for at in (0, 1, 12, len(frame) - 1):  # version, salt, counter, tag
        altered = bytearray(frame)
        altered[at] ^= 1
        with pytest.raises(RefusedFrame):
            b.open(bytes(altered))
    with pytest.raises(RefusedFrame):
        b.open(b"gAAAAABfernet-token")  # pysyncobj's own frames (Fernet) are not read
    with pytest.raises(RefusedFrame):
        b.open(frame[:20])
    with pytest.raises(RefusedFrame, match="sent back"):
        a.open(frame)  # a process's own frame, reflected to it


def test_frames_with_made_up_salts_do_not_evict_a_peers_key(ciphers):
    a, _, _ = ciphers
    b = RaftCipher.from_secret("s3cret")
    assert b.open(a.seal(b"first"))[1] == b"first"
    for k in range(100):
        forged = bytearray(a.seal(b"x"))
        forged[1:9] = k.to_bytes(8, "big")
        with pytest.raises(RefusedFrame):
            b.open(bytes(forged))
    assert list(b._openers) == [a.seal(b"")[1:9]]


def test_processes_seal_under_keys_of_their_own(ciphers):
    """Two processes of one cluster never share a (key, nonce): the same counter under
    different salts gives different ciphertexts."""
    a, b, _ = ciphers
    fa, fb = RaftCipher.from_secret("s3cret"), RaftCipher.from_secret("s3cret")
    x, y = fa.seal(b"same"), fb.seal(b"same")
    assert x[9:17] == y[9:17]  # both first counters
    assert x[1:9] != y[1:9] and x[17:] != y[17:]
    assert a.open(x)[1] == b.open(y)[1] == b"same"


class _Connection(WireConnection):
    """A connection without a socket: what ``send`` writes, and what it parses."""

    def __init__(self, cipher, rand_key=None) -> None:
        super().__init__(createPoller("auto"))
        self.encryptor = cipher
        self.sendRandKey = self.recvRandKey = rand_key
        self.sent = b""
        self.dropped = False

    def _TcpConnection__trySendBuffer(self):  # noqa: N802
        self.sent += self._TcpConnection__writeBuffer
        self._TcpConnection__writeBuffer = b""

    def disconnect(self):
        self.dropped = True
        return super().disconnect()

    def receive(self, data: bytes) -> list:
        self._TcpConnection__readBuffer += data
        out = []
        while (m := self._TcpConnection__processParseMessage()) is not None:
            out.append(m)
        return out


def test_messages_round_trip_and_a_replayed_frame_drops_the_connection(ciphers):
    a, b, _ = ciphers
    sender, receiver = _Connection(a, b"k" * 32), _Connection(b, b"k" * 32)
    append = {"type": "append_entries", "entries": [(b"x" * 1000, 7, 2)]}
    sender.send(append)
    sender.send("second")
    frames = sender.sent
    assert receiver.receive(frames[:10]) == []  # a partial frame waits
    assert receiver.receive(frames[10:]) == [append, "second"]
    assert not receiver.dropped
    (first_len,) = HEAD.unpack_from(frames)
    assert receiver.receive(frames[: HEAD.size + first_len]) == []
    assert receiver.dropped


def test_a_message_without_the_handshake_key_drops_the_connection(ciphers):
    a, b, _ = ciphers
    sender, receiver = _Connection(a, b"j" * 32), _Connection(b, b"k" * 32)
    sender.send("hello")
    assert receiver.receive(sender.sent) == [] and receiver.dropped


def test_an_accepted_connections_first_message_must_be_a_handshake_key(ciphers):
    a, b, _ = ciphers
    for first, taken in ((b"k" * 32, True), ({"type": "append_entries"}, False), (b"k" * 4096, False)):
        sender, receiver = _Connection(a), _Connection(b)  # no keys yet: the first message
        sender.send(first)
        assert (receiver.receive(sender.sent) == [first]) is taken
        assert receiver.dropped is not taken


def test_without_a_secret_a_frame_is_the_pickle():
    sender = _Connection(None)
    sender.send(("n2", 5))
    assert sender.sent == HEAD.pack(len(sender.sent) - HEAD.size) + pickle.dumps(("n2", 5), protocol=5)
    assert _Connection(None).receive(sender.sent) == [("n2", 5)]


def test_a_large_frame_goes_out_whole_and_in_order_through_a_socket():
    """The send buffer is consumed from its front as the socket takes it."""
    mine, theirs = socket.socketpair()
    mine.setblocking(False)
    sender = WireConnection(createPoller("auto"))
    sender._TcpConnection__socket = mine
    big = bytes(range(256)) * 16_384  # 4 MiB
    sender._TcpConnection__writeBuffer = bytearray(HEAD.pack(len(big)) + big)
    got = bytearray()
    while sender._TcpConnection__writeBuffer or len(got) < HEAD.size + len(big):
        sender._TcpConnection__processSend()
        got += theirs.recv(1 << 20)
    mine.close()
    theirs.close()
    assert bytes(got) == HEAD.pack(len(big)) + big
    left = sender._TcpConnection__writeBuffer
    assert isinstance(left, bytearray) and not left


def test_what_the_socket_did_not_take_goes_out_on_its_own():
    """A frame larger than the socket's buffer is sent whole by polling alone, with no
    later message on the connection to push its tail out (pysyncobj left the tail until
    the connection's next message, up to a heartbeat later)."""
    mine, theirs = socket.socketpair()
    mine.setblocking(False)
    theirs.setblocking(False)
    got: list = []
    sending, receiving = createPoller("auto"), createPoller("auto")
    sender = WireConnection(sending, socket=mine)  # connected, as an accepted connection is
    WireConnection(receiving, onMessageReceived=got.append, socket=theirs)
    sending.poll(0)  # its first writable event, with nothing to send: it stops watching for more
    big = bytes(range(256)) * 16_384  # 4 MiB, far more than a socket's buffer
    sender.send(big)
    assert sender.getSendBufferSize() > 0  # the socket took part of it
    for _ in range(1_000):
        sending.poll(0)
        receiving.poll(0)
        if got:
            break
    mine.close()
    theirs.close()
    assert got == [big]
    assert sender.getSendBufferSize() == 0
