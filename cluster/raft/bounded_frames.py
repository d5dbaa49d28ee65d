"""Raft frames that claim more than a bound are refused before they are buffered.

A Raft message travels as ``i32 length | frame`` (cluster/raft/wire.py), and a frame is
read whole into memory before it is opened, whatever length its header claims. So a
peer without the cluster secret, which can decrypt nothing, could still make a node
hold up to 2 GiB per connection, and pysyncobj reads a connection until the socket is
empty before it parses anything. A connection is dropped as soon as its next frame
claims a negative length or more than ``MAX_FRAME_BYTES`` (checked after every read and
before every parse), or while more than ``MAX_BUFFERED_BYTES`` wait to be parsed.

This is the class pysyncobj makes its connections of, accepted and dialled: the node
names it among its parts (``seam.Parts.connection``), and the seam installs it
(``seam.install_connection_class``) before the first connection is made or accepted.
"""

from __future__ import annotations

import logging

from .wire import HEAD, WireConnection

log = logging.getLogger(__name__)

# The largest honest frame is an append batch (4 MiB of entries) or a snapshot shipment
# chunk (512 KiB), pickled and sealed: far below this.
MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_BUFFERED_BYTES = 2 * MAX_FRAME_BYTES  # one whole frame and the next, unparsed


class BoundedTcpConnection(WireConnection):
    def _out_of_bounds(self) -> str | None:
        buf = self.read_buffer
        if len(buf) > MAX_BUFFERED_BYTES:
            return f"{len(buf)} bytes wait to be parsed"
        if len(buf) >= HEAD.size:
            (n,) = HEAD.unpack_from(buf)
            if not 0 <= n <= MAX_FRAME_BYTES:
                return f"a frame claims {n} bytes"
        return None

    def _refused(self) -> bool:
        why = self._out_of_bounds()
        if why is not None:
            log.warning("dropped a Raft connection from %s: %s", self.peer(), why)
            self.disconnect()
        return why is not None

    def _read_some(self) -> bool:
        return super()._read_some() and not self._refused()

    def _parse_message(self):
        if self._refused():
            return None
        return super()._parse_message()
