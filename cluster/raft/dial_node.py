"""A pysyncobj node whose identity is its Raft address but which is dialled elsewhere, and
which carries the member's id and HTTP address.

pysyncobj connects to ``node.ip:node.port`` and identifies a peer by the address string
it sends after connecting (transport._shouldConnect), so overriding ``ip``/``port``
routes each link through its own proxy while identities stay the same.

The node objects are what pysyncobj replicates as the membership (its membership entries
and every snapshot's cluster pickle them), so the member's id and HTTP address travel with
it: a node that learns of a new member learns where its API is. Equality and hashing stay
pysyncobj's: by the Raft address.
"""

from __future__ import annotations

from pysyncobj.node import TCPNode


class DialNode(TCPNode):
    def __init__(self, address: str, dial: str | None = None, node_id: str = "", http: str = "") -> None:
        super().__init__(address)
        host, _, port = (dial or address).rpartition(":")
        self._dial_host = host
        self._dial_port = int(port)
        self.node_id = node_id
        self.http = http

    @property
    def ip(self) -> str:
        return self._dial_host

    @property
    def port(self) -> int:
        return self._dial_port

    def __getstate__(self):  # pickled into snapshots and membership entries: not the dial
        return {"address": self.address, "node_id": self.node_id, "http": self.http}

    def __setstate__(self, state) -> None:
        # Snapshots written before members carried their id and HTTP address hold only
        # the address; the node's settings name the rest (RaftNode._local).
        self.__init__(state["address"], None, state.get("node_id", ""), state.get("http", ""))
