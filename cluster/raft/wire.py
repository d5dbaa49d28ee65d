"""Raft messages on the wire: ``i32 length | frame``, a frame being the message pickled
and, with a cluster secret, sealed with AES-256-GCM.

pysyncobj frames a message as ``Fernet(zlib(pickle))``: a zlib pass at level 3 and
Fernet's AES-CBC, HMAC and base64, with the HMAC checked twice on receipt (once to read
the timestamp, once to decrypt). Measured in-process here (``python
bench/bench_raft_wire.py``, three runs): 37–45 µs to send and 31–48 µs to receive a
one-entry append, 1.2–1.6 ms and 0.6–0.9 ms for an append of 200 KB (a produce batch of
1,000), each sent once per follower; sealed as below, 3–5 µs, 6 µs, 0.32–0.33 ms and
0.08–0.13 ms.

A sealed frame: ``version (0x01) | salt (8) | counter (8, big-endian) | ciphertext |
tag (16)``.

- The cluster key is PBKDF2-HMAC-SHA256 of the secret (100,000 rounds, as pysyncobj's
  Fernet key was): a weak secret costs a guesser as much as it did.
- Each process seals under a key of its own, HKDF-SHA256 of the cluster key and a salt it
  draws at start; the nonce is a counter (after four zero bytes) that never repeats in a
  process, so no nonce repeats under a key. The version and salt are authenticated too.
- A receiver refuses a frame whose counter is not above the last it took on that
  connection (no frame is replayed within a connection), and pysyncobj's handshake (a
  random key each way, carried in every message after it) keeps a frame of one
  connection from being taken on another.
- A frame that fails any check drops the connection, with a warning in the log; so does
  a frame sealed by the receiving process itself (sent back), and a first message on an
  accepted connection that is not a 32-byte handshake key.

Without a secret (``--insecure-dev``) a frame is the pickle alone.

Nodes from before this format (``Fernet(zlib(pickle))``) and nodes with it cannot read
each other's frames: across this change, a rolling restart leaves the cluster with the
nodes of one version able to commit while the other version's catch up after their own
restart (docs/cluster.md, "The Raft link").
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import pickle
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
from pysyncobj.tcp_connection import CONNECTION_STATE

from .seam import ConnectionSeam

log = logging.getLogger(__name__)

HEAD = struct.Struct("<i")  # a frame's length (pysyncobj's own header was a native int)
VERSION = b"\x01"
_SEALED_HEAD = struct.Struct(">c8sQ")  # version, salt, counter
_TAG = 16
_LABEL = b"horologe raft link v1"  # PBKDF2 salt and HKDF info: keys of this use only
_KEY_ROUNDS = 100_000
_KNOWN_SENDERS = 64  # per-salt keys a receiver keeps (one per peer process it heard)


class RefusedFrame(Exception):
    """A frame that is not a peer's (wrong secret, altered, replayed, malformed)."""


class RaftCipher:
    """Seals the frames this process sends and opens its peers'."""

    def __init__(self, cluster_key: bytes) -> None:
        self._cluster_key = cluster_key
        self._salt = os.urandom(8)
        self._seal = AESGCM(self._sender_key(self._salt)).encrypt
        self._counter = itertools.count(1)
        self._openers: dict[bytes, AESGCM] = {}

    @classmethod
    def from_secret(cls, secret: str | bytes) -> RaftCipher:
        """pysyncobj's ``getEncryptor(password)``, as the Raft node installs it."""
        raw = secret.encode() if isinstance(secret, str) else secret
        kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=_LABEL, iterations=_KEY_ROUNDS)
        return cls(kdf.derive(raw))

    def _sender_key(self, salt: bytes) -> bytes:
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=_LABEL).derive(self._cluster_key)

    def seal(self, data: bytes) -> bytes:
        counter = next(self._counter)
        head = _SEALED_HEAD.pack(VERSION, self._salt, counter)
        return head + self._seal(_nonce(counter), data, head[:9])

    def open(self, frame: bytes) -> tuple[int, bytes]:
        """(the sender's counter, the data) of a sealed frame; RefusedFrame if it is not one."""
        if len(frame) < _SEALED_HEAD.size + _TAG or frame[:1] != VERSION:
            raise RefusedFrame("not a sealed frame of this version")
        _, salt, counter = _SEALED_HEAD.unpack_from(frame)
        if salt == self._salt:
            raise RefusedFrame("a frame this process sealed, sent back")
        opener = self._openers.get(salt)
        known = opener is not None
        if not known:
            opener = AESGCM(self._sender_key(salt))
        try:
            data = opener.decrypt(_nonce(counter), frame[_SEALED_HEAD.size :], frame[:9])
        except InvalidTag:
            raise RefusedFrame(
                "sealed with another secret (is cluster_secret the same there?), or altered"
            ) from None
        if not known:  # kept once a frame opened with it: forged salts cannot evict a peer's
            if len(self._openers) >= _KNOWN_SENDERS:
                self._openers.clear()
            self._openers[salt] = opener
        return counter, data


def _nonce(counter: int) -> bytes:
    return counter.to_bytes(12, "big")


class WireConnection(ConnectionSeam):
    """pysyncobj's connection with the frames above (its hooks in the seam: ``_send_some``,
    ``_read_some``, ``_parse_message``). ``encryptor`` (set by pysyncobj's
    transport, a :class:`RaftCipher` here) is None without a secret; ``recvLastTimestamp``
    holds the last counter taken (pysyncobj resets it to 0 with each connection).

    Its buffers are bytearrays, written at the end and consumed from the front in place.
    pysyncobj's are bytes, which it slices after every ``send`` and extends after every
    ``recv``, copying all that is left each time: a 4 MiB append that the socket takes
    64 KiB at a time was copied whole about 64 times, on the leader's tick thread, once
    per follower (frames are no longer compressed, so they are larger than before)."""

    def send(self, message) -> None:
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        if self.encryptor:
            data = self.encryptor.seal(data)
        out = self._buffer("write_buffer")
        out += HEAD.pack(len(data))
        out += data
        self.try_send()
        if out and self.state == CONNECTION_STATE.CONNECTED:
            # Wake the tick thread when the socket takes more. pysyncobj sends what the
            # socket takes at once and leaves the rest in the buffer, without asking its
            # poller for the socket's writable event: the rest went out only with the
            # connection's next message. A produce batch's append (~260 KB for 1,000
            # messages) does not fit the socket's buffer, so its tail waited for the next
            # append or keep-alive (up to a heartbeat, 50 ms), with the nodes mostly idle
            # meanwhile. pysyncobj's own handler of the event sends the rest, and stops
            # watching once the buffer is empty.
            self.watch_writable()

    def _buffer(self, name: str) -> bytearray:
        """The buffer ``name`` (``write_buffer`` or ``read_buffer``) as a bytearray
        (pysyncobj sets a new ``bytes()`` with each connection)."""
        buf = getattr(self, name)
        if type(buf) is not bytearray:
            buf = bytearray(buf)
            setattr(self, name, buf)
        return buf

    def _send_some(self) -> bool:
        out = self._buffer("write_buffer")
        if not out:
            return False
        try:
            sent = self.sock.send(out)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if sent <= 0:
            return False
        del out[:sent]
        return True

    def _read_some(self) -> bool:
        self._buffer("read_buffer")  # so that pysyncobj's += extends it in place
        return super()._read_some()

    def _parse_message(self):
        buf = self._buffer("read_buffer")
        if len(buf) < HEAD.size:
            return None
        (n,) = HEAD.unpack_from(buf)
        if len(buf) - HEAD.size < n:
            return None
        try:
            message = self._opened(bytes(buf[HEAD.size : HEAD.size + n]))
        except Exception as e:  # noqa: BLE001 - whatever a frame holds, it only drops the connection
            log.warning("dropped a Raft connection from %s: %s", self.peer(), e)
            self.disconnect()
            return None
        del buf[: HEAD.size + n]
        return message

    def peer(self) -> str:
        """The other end's address, for a log line: which machine to look at."""
        try:
            host, port = self.sock.getpeername()[:2]
        except (OSError, AttributeError):  # gone already
            return "a peer no longer connected"
        return f"{host}:{port}"

    def _opened(self, frame: bytes):
        if self.encryptor:
            counter, frame = self.encryptor.open(frame)
            if counter <= self.recvLastTimestamp:
                raise RefusedFrame(f"frame {counter} replayed (the last taken was {self.recvLastTimestamp})")
            self.recvLastTimestamp = counter
        message = pickle.loads(frame)
        handshake_key = isinstance(message, bytes) and len(message) == 32
        if self.encryptor and not self.recvRandKey and not handshake_key:
            # pysyncobj's handshake: the first message on an accepted connection is the
            # dialler's random key, the only one without this connection's key in it
            raise RefusedFrame("a first message that is not a handshake key")
        if self.recvRandKey:
            if not (isinstance(message, tuple) and len(message) == 2 and message[0] == self.recvRandKey):
                raise RefusedFrame("a message without this connection's handshake key")
            message = message[1]
        return message
