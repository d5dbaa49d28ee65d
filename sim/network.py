"""A simulated network between Raft nodes that behaves as pysyncobj's TCP links do.

One connection per pair of nodes, dialled by the node with the larger address (as
``TCPTransport._shouldConnect``), carrying pickled messages (pysyncobj's own pickle, as on
the wire) in each direction:

* **FIFO per direction**: a message is delivered at ``max(previous delivery on that
  direction, now + delay)``; nothing is reordered on a connection, nothing is duplicated.
  With a bandwidth (``bytes_per_s``, :data:`LINK_BYTES_PER_S` unless a scripted scenario
  sets another), a message leaves only once the bytes queued before it have left, and
  its own have.
* **Loss only by disconnect**: when a connection breaks, what it still carries is gone,
  both ends learn it (``_onNodeDisconnected``), and the dialler reconnects after
  ``connectionRetryTime``. A message already sent by a node that then crashed still
  arrives, followed by the connection's end (the kernel's FIN).
* **Paths** (one direction between two nodes) are ``open``, ``drop`` (a blackhole: what is
  sent waits, and arrives after the heal if the connection lived that long) or ``reject``
  (the connection breaks at once, and connects are refused while it lasts). A connection
  whose end has read nothing for ``connectionTimeout`` breaks at that end's next send,
  as pysyncobj's ``__processConnectionTimeout`` does.

Handshake: the dialler's end is up one round trip after the dial, and it sends its
address first; the acceptor's end is up when that address arrives (no encryption: the
simulator runs ``insecure_dev``). As pysyncobj's transport does, a node dials only the
nodes it knows (its membership, and a learner it feeds: ``addNode``), and the acceptor
resets a connection whose address it does not know (transport.py, an unknown node id).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pysyncobj.pickle as raft_pickle
from pysyncobj.transport import Transport

OPEN, DROP, REJECT = "open", "drop", "reject"
LINK_BYTES_PER_S = 1_000_000  # each direction's bandwidth (8 Mbit/s), unless set otherwise


@dataclass
class _Item:
    kind: str  # "hello", "msg" or "fin"
    payload: bytes | None
    at_ns: int
    gen: int = 0


@dataclass
class _Direction:
    queue: deque = field(default_factory=deque)
    last_ns: int = 0
    free_ns: int = 0  # when the sender has put out what it queued (with a bandwidth)


@dataclass
class Conn:
    """The one connection of a pair of nodes (``lo`` < ``hi`` by address; ``hi`` dials)."""

    lo: str
    hi: str
    epoch: int = 0
    up: dict[str, bool] = field(default_factory=dict)  # address -> that end believes it is up
    last_read_ns: dict[str, int] = field(default_factory=dict)
    dialing: bool = False
    last_dial_ns: int | None = None
    dirs: dict[tuple[str, str], _Direction] = field(default_factory=dict)

    def other(self, addr: str) -> str:
        return self.hi if addr == self.lo else self.lo


class SimNetwork:
    def __init__(self, world, addresses: list[str]) -> None:
        self.world = world
        self.addresses = sorted(addresses)
        self.transports: dict[str, SimTransport] = {}  # address -> the live incarnation's
        self.paths: dict[tuple[str, str], str] = {
            (a, b): OPEN for a in self.addresses for b in self.addresses if a != b
        }
        # per direction: (base delay ns, jitter ns); faults change them
        self.delay: dict[tuple[str, str], tuple[int, int]] = {}
        self.conns: dict[tuple[str, str], Conn] = {}
        for i, a in enumerate(self.addresses):
            for b in self.addresses[i + 1 :]:
                conn = Conn(a, b)
                conn.up = {a: False, b: False}
                conn.last_read_ns = {a: 0, b: 0}
                conn.dirs = {(a, b): _Direction(), (b, a): _Direction()}
                self.conns[(a, b)] = conn
        for path in self.paths:
            self.delay[path] = (world.rng.randrange(100_000, 2_000_000), world.rng.randrange(0, 1_000_000))
        self.messages = 0
        self.bytes = 0
        # Each direction's bandwidth, bytes/s: a message leaves once the ones before it have
        # (None: at once, whatever its size).
        self.bytes_per_s: int | None = LINK_BYTES_PER_S

    # -- topology ------------------------------------------------------------------

    def conn(self, a: str, b: str) -> Conn:
        return self.conns[(a, b) if a < b else (b, a)]

    def set_path(self, src: str, dst: str, state: str) -> None:
        old = self.paths[(src, dst)]
        self.paths[(src, dst)] = state
        conn = self.conn(src, dst)
        if state == REJECT:
            self.break_conn(conn, "reset by a reject partition", at_once=True)
        elif state == OPEN and old != OPEN:
            # What arrived under a DROP waits in the queue; a REJECT over it clears nothing
            # of a connection already down (a FIN to a dead node), so it waits too.
            self._resume(conn, (src, dst))

    def _latency(self, src: str, dst: str) -> int:
        base, jitter = self.delay[(src, dst)]
        return base + (self.world.rng.randrange(jitter) if jitter else 0)

    # -- attach and detach incarnations ------------------------------------------------

    def attach(self, transport: SimTransport) -> None:
        self.transports[transport.address] = transport

    def detach(self, address: str) -> None:
        """The process at ``address`` died: its sockets close (a FIN follows what it sent)."""
        self.transports.pop(address, None)
        for conn in self.conns.values():
            if address not in (conn.lo, conn.hi):
                continue
            peer = conn.other(address)
            conn.up[address] = False
            conn.dialing = False if conn.hi == address else conn.dialing
            inbound = conn.dirs[(peer, address)]
            for item in inbound.queue:
                item.gen += 1
            inbound.queue.clear()
            self._enqueue(conn, address, peer, _Item("fin", None, 0))

    # -- connecting ----------------------------------------------------------------------

    def maybe_dial(self, transport: SimTransport) -> None:
        """The dialler's tick: reconnect each connection it owns that is down (retry-paced)."""
        me = transport.address
        now = self.world.clock.ns
        retry_ns = int(transport.retry_s * 1e9)
        for peer in self.addresses:
            if peer >= me or not transport.knows(peer):
                continue
            conn = self.conn(me, peer)
            if conn.up[me] or conn.dialing:
                continue
            if conn.last_dial_ns is not None and now - conn.last_dial_ns < retry_ns:
                continue
            conn.last_dial_ns = now
            if (
                peer not in self.transports
                or self.paths[(me, peer)] != OPEN
                or self.paths[(peer, me)] != OPEN
            ):
                self.world.note(f"dial {me}->{peer} refused")
                continue
            conn.dialing = True
            conn.epoch += 1
            epoch = conn.epoch
            rtt = self._latency(me, peer) + self._latency(peer, me)
            self.world.at(rtt, "raft", me, self._established, conn, epoch)

    def _established(self, conn: Conn, epoch: int) -> None:
        conn.dialing = False
        hi, lo = conn.hi, conn.lo
        if epoch != conn.epoch or hi not in self.transports or lo not in self.transports:
            return
        if not self.transports[hi].knows(lo):
            return  # dropped while the dial was under way
        if self.paths[(hi, lo)] != OPEN or self.paths[(lo, hi)] != OPEN:
            return
        for d in conn.dirs.values():
            for item in d.queue:
                item.gen += 1
            d.queue.clear()
        conn.up[hi] = True
        conn.last_read_ns[hi] = self.world.clock.ns
        self.world.note(f"link {hi}->{lo} up (epoch {epoch})")
        self._enqueue(conn, hi, lo, _Item("hello", None, 0))
        self.transports[hi].connected(lo)

    def break_conn(self, conn: Conn, why: str, at_once: bool = False, by: str | None = None) -> None:
        """The connection ends: what it carries is lost; ``by``'s end learns it now, the
        other end after a transit (or now, ``at_once``: a reset both ways)."""
        if not (conn.up[conn.lo] or conn.up[conn.hi] or conn.dialing):
            return
        conn.epoch += 1
        conn.dialing = False
        self.world.note(f"link {conn.lo}-{conn.hi} broken: {why}")
        for d in conn.dirs.values():
            for item in d.queue:
                item.gen += 1
            d.queue.clear()
        for end in (conn.lo, conn.hi):
            if not conn.up[end]:
                continue
            if at_once or end == by:
                self._down(conn, end)
            else:
                epoch = conn.epoch
                self.world.at(
                    self._latency(conn.other(end), end), "raft", end, self._fin_late, conn, end, epoch
                )

    def _fin_late(self, conn: Conn, end: str, epoch: int) -> None:
        if conn.epoch == epoch and conn.up[end]:
            self._down(conn, end)

    def _down(self, conn: Conn, end: str) -> None:
        conn.up[end] = False
        transport = self.transports.get(end)
        if transport is not None:
            transport.disconnected(conn.other(end))

    # -- sending and delivering ----------------------------------------------------------

    def send(self, src: str, dst: str, message) -> bool:
        conn = self.conn(src, dst)
        if not conn.up[src]:
            return False
        now = self.world.clock.ns
        timeout_ns = int(self.transports[src].timeout_s * 1e9)
        if now - conn.last_read_ns[src] > timeout_ns:
            self.break_conn(conn, f"{src} read nothing for {timeout_ns / 1e9} s", by=src)
            return False
        data = raft_pickle.dumps(message)
        self.messages += 1
        self.bytes += len(data)
        self._enqueue(conn, src, dst, _Item("msg", data, 0))
        return True

    def _enqueue(self, conn: Conn, src: str, dst: str, item: _Item) -> None:
        d = conn.dirs[(src, dst)]
        sent_ns = self.world.clock.ns
        if self.bytes_per_s and item.payload is not None:
            sent_ns = max(sent_ns, d.free_ns) + len(item.payload) * 1_000_000_000 // self.bytes_per_s
            d.free_ns = sent_ns
        item.at_ns = max(d.last_ns, sent_ns + self._latency(src, dst))
        d.last_ns = item.at_ns
        d.queue.append(item)
        self.world.at_abs(item.at_ns, "raft", dst, self._arrive, conn, (src, dst), item, item.gen)

    def _resume(self, conn: Conn, path: tuple[str, str]) -> None:
        """A blackholed direction heals: what waited goes on, in order."""
        d = conn.dirs[path]
        d.last_ns = 0
        for item in d.queue:
            item.gen += 1
            item.at_ns = max(d.last_ns, self.world.clock.ns + self._latency(*path))
            d.last_ns = item.at_ns
            self.world.at_abs(item.at_ns, "raft", path[1], self._arrive, conn, path, item, item.gen)

    def _arrive(self, conn: Conn, path: tuple[str, str], item: _Item, gen: int) -> None:
        if gen != item.gen:
            return
        if self.paths[path] == DROP:
            return  # waits for the heal (_resume)
        d = conn.dirs[path]
        assert d.queue and d.queue[0] is item, "a direction delivers in order"
        d.queue.popleft()
        src, dst = path
        transport = self.transports.get(dst)
        if transport is None:
            return
        self._read(conn, src, dst, item, transport)
        if self.world.profile.timed_waits:  # the poll returns: the tick thread goes round
            self.world.by_address[dst].wake()

    def _read(self, conn: Conn, src: str, dst: str, item: _Item, transport: SimTransport) -> None:
        conn.last_read_ns[dst] = self.world.clock.ns
        if item.kind == "fin":
            if conn.up[dst]:
                self.world.note(f"link {src}->{dst} closed by {src}")
                self._down(conn, dst)
            return
        if item.kind == "hello":
            if not transport.knows(src):
                self.break_conn(conn, f"{dst} does not know {src}", at_once=True)
                return
            conn.up[dst] = True
            self.world.note(f"link {src}->{dst} accepted")
            transport.connected(src)
            return
        if not conn.up[dst]:
            return
        transport.deliver(src, raft_pickle.loads(item.payload))

    def queued_bytes(self, src: str, dst: str) -> int:
        d = self.conn(src, dst).dirs[(src, dst)]
        return sum(len(i.payload) for i in d.queue if i.payload is not None)


class _SimConnection:
    """What ``SyncObjSeam.send_backlog`` reads of a connection: the bytes not yet delivered."""

    def __init__(self, network: SimNetwork, src: str, dst: str) -> None:
        self._network, self._src, self._dst = network, src, dst

    def getSendBufferSize(self) -> int:  # noqa: N802 - pysyncobj's name
        return self._network.queued_bytes(self._src, self._dst)


class SimTransport(Transport):
    """pysyncobj's transport over :class:`SimNetwork`; built by ``SyncObj.__init__`` as
    ``transportClass(syncObj, selfNode, otherNodes)`` (see :func:`transport_for`)."""

    network: SimNetwork  # set on the subclass transport_for makes

    def __init__(self, syncObj, selfNode, otherNodes) -> None:  # noqa: N803 - pysyncobj's names
        super().__init__(syncObj, selfNode, otherNodes)
        self._syncObj = syncObj
        self.address = selfNode.address
        self._nodes = {n.address: n for n in otherNodes}
        self.retry_s = syncObj.conf.connectionRetryTime
        self.timeout_s = syncObj.conf.connectionTimeout
        self._connections = {n: _SimConnection(self.network, self.address, n.address) for n in otherNodes}
        self.destroyed = False
        syncObj.addOnTickCallback(self._on_tick)
        self.network.attach(self)

    def _on_tick(self) -> None:
        if not self.destroyed:
            self.network.maybe_dial(self)

    def send(self, node, message) -> bool:
        if self.destroyed or node.address not in self._nodes:
            return False
        if isinstance(message, dict) and message.get("type") == "next_node_idx" and message.get("success"):
            self.network.world.check_answer(self._syncObj, self.address, message)
        elif isinstance(message, dict) and message.get("type") == "response_vote":
            self.network.world.check_vote(self.address, node.address, message["term"])
        return self.network.send(self.address, node.address, message)

    def knows(self, address: str) -> bool:
        return address in self._nodes

    def addNode(self, node) -> None:  # noqa: N802 - pysyncobj's name
        self._nodes[node.address] = node
        self._connections[node] = _SimConnection(self.network, self.address, node.address)

    def dropNode(self, node) -> None:  # noqa: N802 - pysyncobj's name
        if node.address not in self._nodes:
            return
        # As TCP's (transport.py:535): the node is forgotten before its connection closes,
        # so pysyncobj is not told the link went (the shell's forget_link sees to that).
        del self._nodes[node.address]
        self._connections.pop(node, None)
        self.network.break_conn(self.network.conn(self.address, node.address), "dropped", by=self.address)

    def connected(self, address: str) -> None:
        if address in self._nodes:
            self._onNodeConnected(self._nodes[address])

    def disconnected(self, address: str) -> None:
        if address in self._nodes:
            self._onNodeDisconnected(self._nodes[address])

    def deliver(self, address: str, message) -> None:
        if address in self._nodes:
            self._onMessageReceived(self._nodes[address], message)

    def destroy(self) -> None:
        self.destroyed = True


def transport_for(network: SimNetwork) -> type[SimTransport]:
    return type("BoundSimTransport", (SimTransport,), {"network": network})
