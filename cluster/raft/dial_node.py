"""A pysyncobj node whose identity is its Raft address but which is dialled elsewhere.

pysyncobj connects to ``node.ip:node.port`` and identifies a peer by the address string
it sends after connecting (transport._shouldConnect), so overriding ``ip``/``port``
routes each link through its own proxy while identities stay the same.
"""

from __future__ import annotations

from pysyncobj.node import TCPNode


class DialNode(TCPNode):
    def __init__(self, address: str, dial: str | None = None) -> None:
        super().__init__(address)
        host, _, port = (dial or address).rpartition(":")
        self._dial_host = host
        self._dial_port = int(port)

    @property
    def ip(self) -> str:
        return self._dial_host

    @property
    def port(self) -> int:
        return self._dial_port

    def __getstate__(self):  # pickled into snapshots: keep only what identifies the node
        return {"address": self.address}

    def __setstate__(self, state) -> None:
        self.__init__(state["address"])
