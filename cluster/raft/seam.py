"""The one seam into pysyncobj: everything the Raft shell reaches inside it, and the check
that all of it is still there.

pysyncobj 0.3.17 has no extension points for what the shell adds (docs/cluster.md, "Safety
rules of the Raft shell"), so the shell overrides private methods of its classes, reads and
sets their name-mangled members and swaps module globals. All of that is in this module and
nowhere else in cluster/raft/ (tests/cluster/test_raft_seam.py checks it):

* :class:`SyncObjSeam`, the base of ``RaftNode`` (node.py). Each override of a ``SyncObj``
  method does pysyncobj's plumbing only and hands the decision to a hook, a method of the
  seam whose default is pysyncobj's own behaviour and which ``RaftNode`` overrides. Each
  member is read or set through an accessor named for what it is.
* :class:`ConnectionSeam`, the same for ``TcpConnection``. Its hooks are implemented by the
  Raft link's connection: ``WireConnection`` (wire.py, the sealed frames and bytearray
  buffers) and ``BoundedTcpConnection`` (bounded_frames.py, the frame bounds), the class
  pysyncobj is made to build.
* :class:`TransportSeam`, pysyncobj's TCP transport with ``addNode`` made safe to call for
  a node that already has a connection, and a failed bind of the Raft address logged.
* The module globals: the parts ``SyncObj.__init__`` builds (:class:`Parts`: the journal,
  the serializer, the link's cipher), the connection class of both places that make
  connections (:func:`install_connection_class`) and the pickle protocol.
* The contract. A release that renamed one of the names reached here would not fail: an
  override would simply never be called again, and followers would, say, acknowledge
  entries before they are on disk. So pysyncobj is pinned to one version (pyproject.toml,
  which the Dockerfile installs), and a node refuses to start on a version this was not
  checked against (:data:`TESTED_VERSIONS`), when a name below is missing from the class
  or module it is taken from (:func:`check_pysyncobj`), or when a node built on it does not
  hold the shell's own parts (:func:`check_node`). The lists checked (:data:`METHODS`,
  :data:`MEMBERS`, :data:`GLOBALS`) are derived from the classes below, so they name
  exactly what the seam reaches. Adding a version means reading its source against every
  name here, and running the suite, the chaos suite and the soak on it.

Other modules of the shell build on pysyncobj's public interfaces only, and stay where they
are: journal.py's ``DiskJournal`` implements ``Journal`` (and reads old journals with
``FileJournal``), snapshot_stream.py's ``ShippingSerializer`` extends ``Serializer``,
dial_node.py's ``DialNode`` overrides ``TCPNode``'s ``ip`` and ``port``, dump_file.py
answers with ``SERIALIZER_STATE``. The methods they override are in :data:`METHODS` too.

Every reach names the line of pysyncobj 0.3.17 it replaces, wraps or reads, as ``file:LINE``
in ``.venv/lib/python3.11/site-packages/pysyncobj/``; the test above checks each line.

Threads: the SyncObj overrides and accessors run on pysyncobj's tick thread (or the thread
that builds the node, before the tick thread starts), as pysyncobj's own code does; only
``SyncObjSeam.wake_tick_thread`` is for any thread.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from queue import Empty
from typing import Any

import pysyncobj.pickle as raft_pickle
import pysyncobj.syncobj as syncobj_module
import pysyncobj.tcp_server as tcp_server_module
import pysyncobj.transport as transport_module
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.fast_queue import FastQueue
from pysyncobj.monotonic import monotonic as monotonicTime
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.serializer import Serializer
from pysyncobj.syncobj import _RAFT_STATE
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport
from pysyncobj.version import VERSION

from ..errors import UnsupportedPysyncobjError

log = logging.getLogger(__name__)

TESTED_VERSIONS = frozenset({"0.3.17"})

# pickle.py:45 `__protocol = 2`, which pysyncobj's dumps (pickle.py:77) reads at call time;
# the field notes measured protocol 4 at twice the throughput. Set once, when the shell is
# imported, for the whole process (the journal's meta file is written with it).
PICKLE_PROTOCOL = 4
UNANSWERED_WARN = 3  # dialled handshakes a peer closed unanswered in a row, then a warning
setattr(raft_pickle, "__protocol", PICKLE_PROTOCOL)


# -- how a reach is declared: each names the line it replaces or reads -------------------


def _replaces(where: str):
    """Mark a method as the override of pysyncobj's method of the same name, at ``where``."""

    def mark(fn):
        fn.replaces = where
        return fn

    return mark


def _hook(fn):
    """Mark a method as a hook: an override calls it, its body is pysyncobj's behaviour, and
    the shell's class overrides it (tests/cluster/test_raft_seam.py checks that each is)."""
    fn.hook = True
    return fn


class _Member:
    """A name-mangled member of pysyncobj's object, read (and, if ``settable``, set) under
    a name that says what it is; ``where`` is the line that makes it."""

    def __init__(self, mangled: str, where: str, settable: bool = False) -> None:
        self.mangled, self.where, self.settable = mangled, where, settable

    def __get__(self, obj, owner=None) -> Any:
        return self if obj is None else getattr(obj, self.mangled)

    def __set__(self, obj, value) -> None:
        if not self.settable:
            raise AttributeError(f"{self.mangled} is read through the seam, never set")
        setattr(obj, self.mangled, value)


class _ElectionDeadline(_Member):
    """pysyncobj's election deadline, put in place of its member: a data descriptor under the
    member's own name. Every write of pysyncobj's (syncobj.py:162, :636, :915, :939, :952)
    lands in ``SyncObjSeam.election_deadline``, which the shell reads and sets. pysyncobj
    reads it at one line only, the tick's look at whether to stand (:635); while the tick is
    held (``SyncObjSeam._onTick``) that read finds a deadline that never passes. (Its scans
    of every attribute, :226 and :460, read it too, and look only at whether it is
    callable.)"""

    def __get__(self, obj, owner=None) -> Any:
        if obj is None:
            return self
        return math.inf if obj._stand_held else obj.election_deadline

    def __set__(self, obj, value) -> None:
        obj.election_deadline = value


class _Method:
    """A private method of pysyncobj's, called (not replaced) under a name that says what
    it does; ``where`` is its ``def``."""

    def __init__(self, mangled: str, where: str) -> None:
        self.mangled, self.where = mangled, where

    def __get__(self, obj, owner=None) -> Any:
        return self if obj is None else getattr(obj, self.mangled)


# -- the parts SyncObj.__init__ builds, and the connection class ---------------------------


@dataclass(frozen=True)
class Parts:
    """What pysyncobj builds from its module's globals, made by the shell instead."""

    # createJournal(journalFile), syncobj.py:166: the journal (journal.py's DiskJournal)
    journal: Callable[[str], Any]
    # Serializer(fullDumpFile, ...), syncobj.py:198: made as serializer(*serializer_args,
    # *pysyncobj's arguments) (snapshot_stream.py's ShippingSerializer)
    serializer: type[Serializer]
    serializer_args: tuple
    # getEncryptor(password), syncobj.py:126: the Raft link's cipher (wire.py's RaftCipher)
    encryptor: Callable[[str], Any]
    # the connection class pysyncobj makes links of (install_connection_class)
    connection: type[TcpConnection]


# Held while pysyncobj's factories are swapped (_pysyncobj_parts): two nodes started at once
# in one process must each get their own parts and leave the factories as they were.
_PARTS_LOCK = threading.Lock()


@contextmanager
def _pysyncobj_parts(**parts):
    """Have ``SyncObj.__init__`` build these parts (syncobj.py's globals: ``createJournal``,
    imported at :41 and called at :166; ``Serializer``, :38 and :198; ``getEncryptor``, :43
    and :126) instead of its own.

    pysyncobj builds its journal (a ``FileJournal`` holding every command in memory, issue
    #12), its serializer and its Raft link's cipher inside ``__init__``, with its module's
    globals and no parameter for others, and starts its tick thread there too: they cannot
    be swapped in after it returns. The globals are swapped for one construction at a time
    and put back even if it fails.
    """
    with _PARTS_LOCK:
        saved = {name: getattr(syncobj_module, name) for name in parts}
        for name, factory in parts.items():
            setattr(syncobj_module, name, factory)
        try:
            yield
        finally:
            for name, original in saved.items():
                setattr(syncobj_module, name, original)


def install_connection_class(connection: type[TcpConnection]) -> None:
    """Have pysyncobj make its connections of class ``connection``, accepted
    (tcp_server.py:65) and dialled (transport.py:522), from now on in this process.

    Both modules make them by the name ``TcpConnection`` they imported, with no parameter for
    another class, all through a node's life, so both names point at ``connection``; it is
    set before a node makes or accepts its first connection, and setting it again is harmless.
    """
    tcp_server_module.TcpConnection = connection
    transport_module.TcpConnection = connection


# -- SyncObj ------------------------------------------------------------------------------

_PIPE_NOTIFIER = "_SyncObj__pipeNotifier"  # syncobj.py:264, see SyncObjSeam.wake_tick_thread
_COMMANDS_QUEUE = "_SyncObj__commandsQueue"  # syncobj.py:262, see SyncObjSeam.fail_waiting_proposals
_QUEUED = "_FastQueue__queue"  # fast_queue.py:12, that queue's deque: see SyncObjSeam.proposals_waiting
_NEXT_APPEND_AT = "_SyncObj__newAppendEntriesTime"  # syncobj.py:268, see _SyncObj__applyLogEntries


class ShipmentWaits(Exception):  # noqa: N818 - a signal between the serializer and the send loop
    """Raised by the serializer's ``getTransmissionData`` (snapshot_stream.py) when the
    shipment to follower ``node`` cannot go on this tick; the send loop's wrapper leaves
    the follower out of the tick's sends."""

    def __init__(self, node) -> None:
        super().__init__(node)
        self.node = node


class SyncObjSeam(SyncObj):
    """pysyncobj's ``SyncObj`` built with the shell's :class:`Parts`, with a hook wherever
    the shell decides what pysyncobj would. ``RaftNode`` (node.py) overrides the hooks:

    ======================================  ============================================
    hook (default: pysyncobj's behaviour)   called from the override of
    ======================================  ============================================
    ``_before_tick() -> may stand``         ``_onTick``, syncobj.py:611
    ``_on_message(node, message)``          ``__onMessageReceived``, syncobj.py:909
    ``_answer_leader(...)``                 ``__sendNextNodeIdx``, syncobj.py:1098
    ``_refuses_proposal(forwarded)``        ``_applyCommand``, syncobj.py:492
    ``_before_proposals()``                 ``_checkCommandsToApply``, syncobj.py:503
    ``_proposals_appended()``               ``_checkCommandsToApply``, syncobj.py:503
    ``_noop_appended()``                    ``__onBecomeLeader``, syncobj.py:1215
    ``_followers_held_back()``              ``__sendAppendEntries``, syncobj.py:1251
    ``_may_compact()``                      ``__tryLogCompaction``, syncobj.py:1421
    ``_commit_told_within()``               ``__applyLogEntries``, syncobj.py:708
    ``_tick_wait(longest)``                 the poller's ``poll``, syncobj.py:706
    ``_clears_journal_on_load(install)``    ``__loadDumpFile``, syncobj.py:1472
    ``_may_change_membership()``            ``__changeCluster``, syncobj.py:1356
    ``_membership_changed(change, back)``   ``__doChangeCluster``, syncobj.py:1374
    ``_dump_loaded()``                      ``__loadDumpFile``, syncobj.py:1472
    ``_membership_applied(change)``         ``__doApplyCommand``, syncobj.py:870
    ``_outgoing(node, message)``            the transport's ``send``, transport.py:166
    ======================================  ============================================

    ``SyncObj.__init__`` reads every attribute of the object (``dir``, syncobj.py:226, and
    again at :460) before it sets its last members (``__pipeNotifier`` at :264,
    ``__newAppendEntriesTime`` at :268). So a member accessor here names only a member set
    before :226 (each names its line), and a later one is read by a method
    (:meth:`wake_tick_thread`).
    """

    # Members, by what they are.
    raft_log = _Member("_SyncObj__raftLog", "syncobj.py:166")  # the journal Parts.journal made
    serializer = _Member("_SyncObj__serializer", "syncobj.py:198")  # the one Parts.serializer made
    transport = _Member("_SyncObj__transport", "syncobj.py:210")  # its send() is every send
    # peers with a live, handshaken link; pysyncobj sends appends only to these
    connected_nodes = _Member("_SyncObj__connectedNodes", "syncobj.py:154", settable=True)
    # the leader's next index per follower (a dict, changed in place)
    next_index = _Member("_SyncObj__raftNextIndex", "syncobj.py:178")
    # the leader's match index per follower (a dict, changed in place)
    match_index = _Member("_SyncObj__raftMatchIndex", "syncobj.py:180")
    # when each follower last answered the leader (monotonic seconds; a dict, changed in
    # place): a leader that heard no majority within leaderFallbackTimeout steps down
    # (syncobj.py:679-686)
    last_answered = _Member("_SyncObj__lastResponseTime", "syncobj.py:179")
    # nodes the leader sends appends to without counting them: the shell's learners
    readonly_nodes = _Member("_SyncObj__readonlyNodes", "syncobj.py:153")
    # when a follower or candidate next stands for election (monotonic seconds): an
    # attribute of the object's own, which pysyncobj's member writes to
    election_deadline: float
    _SyncObj__raftElectionDeadline = _ElectionDeadline("_SyncObj__raftElectionDeadline", "syncobj.py:162")
    _stand_held = False  # this tick stands in no election, whatever the deadline (_onTick)
    _raft_state = _Member("_SyncObj__raftState", "syncobj.py:157")
    # the leader this node follows (``_getLeader``): None once a follower asks for a
    # pre-vote (node.py), as pysyncobj has it when it stands (syncobj.py:638)
    followed_leader = _Member("_SyncObj__raftLeader", "syncobj.py:161", settable=True)
    # what the links are subscribed to; each tick ends in its poll (syncobj.py:706)
    _links_poller = _Member("_poller", "syncobj.py:205")

    # Private methods called as they are.
    _get_entries = _Method("_SyncObj__getEntries", "syncobj.py:1145")
    _current_log_index = _Method("_SyncObj__getCurrentLogIndex", "syncobj.py:1132")
    _generate_raft_timeout = _Method("_SyncObj__generateRaftTimeout", "syncobj.py:1108")
    _call_err_callback = _Method("_SyncObj__callErrCallback", "syncobj.py:1085")
    _parse_change = _Method("_SyncObj__parseChangeClusterRequest", "syncobj.py:1415")

    def __init__(
        self, self_node, other_nodes, conf: SyncObjConf, parts: Parts, transport_class: type | None = None
    ) -> None:
        """``SyncObj.__init__`` (syncobj.py:96) building ``parts`` instead of its own, over
        ``transport_class`` (pysyncobj's ``transportClass``: :class:`TransportSeam` unless
        simulated).

        The connection class is installed first, before any connection is made or accepted.
        A node that fails to build closes the journal it made; one built without the parts is
        refused (:func:`check_node`) and destroyed (its tick thread stops at its next tick).
        """
        install_connection_class(parts.connection)
        journals: list = []

        def create_journal(path: str):
            journals.append(parts.journal(path))
            return journals[-1]

        def create_serializer(*args) -> Serializer:
            return parts.serializer(*parts.serializer_args, *args)

        built = False
        try:
            with _pysyncobj_parts(
                createJournal=create_journal, Serializer=create_serializer, getEncryptor=parts.encryptor
            ):
                transport_class = transport_class or TransportSeam
                SyncObj.__init__(self, self_node, other_nodes, conf, transportClass=transport_class)
            built = True
            check_node(self, journals[-1] if journals else None, parts.serializer)
            self._send_raw = self.transport.send
            self.transport.send = self._send_through
            self._poll_raw = self._links_poller.poll
            self._links_poller.poll = self._poll_through
        except BaseException:
            if built:
                self.destroy()
            elif journals:
                journals[-1].close()
            raise

    def _poll_through(self, timeout: float) -> None:
        """Wraps the poller's ``poll`` (poller.py:44 and :87), installed in place of it:
        every tick ends in it (syncobj.py:706), waiting up to ``autoTickPeriod`` (:593)
        for a message, and here it waits what :meth:`_tick_wait` allows instead. With a
        fixed period short enough for a follower to look at its election deadline in
        time, an idle node woke 200 times a second for nothing."""
        self._poll_raw(self._tick_wait(timeout) if timeout > 0 else timeout)

    def _send_through(self, node, message) -> bool:
        """Wraps the transport's ``send`` (transport.py:166, TCP's at :556), through which
        every message pysyncobj sends passes, installed in place of it: the message as
        :meth:`_outgoing` has it goes to :attr:`_send_raw`, the transport's own."""
        return self._send_raw(node, self._outgoing(node, message))

    @_hook
    def _outgoing(self, node, message):
        """Hook: a message on its way to the peer ``node``, as it should leave."""
        return message

    # -- accessors ------------------------------------------------------------------------

    def is_candidate(self) -> bool:
        """Whether this node stands for election now (``__raftState``, syncobj.py:157)."""
        return self._raft_state == _RAFT_STATE.CANDIDATE

    def last_log_index(self) -> int:
        """The index of the last entry in pysyncobj's log (``__getCurrentLogIndex``)."""
        return self._current_log_index()

    def entry_term(self, index: int) -> int | None:
        """The term of the log's entry at ``index``; None if the log does not hold it
        (``__getEntries``: compacted away, or not yet appended)."""
        entries = self._get_entries(index, 1)
        return entries[0][2] if entries else None

    def random_election_timeout(self) -> float:
        """A fresh election timeout, as pysyncobj draws one (``__generateRaftTimeout``):
        uniform in ``[raftMinTimeout, raftMaxTimeout]`` seconds."""
        return self._generate_raft_timeout()

    def send_backlog(self, node) -> int:
        """Bytes waiting in the write buffer of ``node``'s connection (the transport's
        ``_connections``, transport.py:204); 0 without one."""
        conn = self.transport._connections.get(node)
        return 0 if conn is None else conn.getSendBufferSize()

    def membership_change_of(self, command: bytes) -> list | None:
        """The change of the membership a log entry's command makes (``[kind, address,
        node]``, kind ``"add"`` or ``"rem"``), None for any other entry
        (``__parseChangeClusterRequest``)."""
        return self._parse_change(command)

    def take_membership_change(self, change: list) -> None:
        """Make ``change`` (of :meth:`membership_change_of`) this node's membership now, as
        pysyncobj does when it appends one (``__doChangeCluster``, through the override)."""
        self._SyncObj__doChangeCluster(change)

    def feed_learner(self, node) -> None:
        """Send ``node`` the log as to a follower without counting it for commits or votes:
        pysyncobj's leader sends appends to its read-only nodes too (syncobj.py:1258) and
        counts only ``__otherNodes`` (:661). The transport dials it, or takes its call."""
        self.transport.addNode(node)
        self.readonly_nodes.add(node)
        self.next_index[node] = self.last_log_index() + 1
        self.match_index[node] = 0

    def drop_learner(self, node) -> None:
        """Stop feeding ``node`` (:meth:`feed_learner`); its link goes unless it is a member."""
        if node not in self.readonly_nodes:
            return
        self.readonly_nodes.discard(node)
        self.serializer.forget(node)  # a shipment to it under way would block compaction
        if node not in self.otherNodes:
            self.next_index.pop(node, None)
            self.match_index.pop(node, None)
            self.forget_link(node)

    def forget_link(self, node) -> None:
        """Drop ``node``'s link (``dropNode``, transport.py:535). TCP's forgets the connection
        before it closes it, so pysyncobj is never told the link went: ``node`` would stay
        in ``__connectedNodes`` and count as linked if its address is added again."""
        self.transport.dropNode(node)
        self.connected_nodes = self.connected_nodes - {node}

    def wake_tick_thread(self) -> None:
        """Wake the tick thread from its poll, as a proposal does (``__pipeNotifier``,
        syncobj.py:264, notified at :499), from any thread; without one, it looks within
        ``autoTickPeriod``.

        The notifier exists only on platforms with pipes, and with ``appendEntriesUseBatch``
        off (the shell's setting), so it is read as optional (:data:`OPTIONAL_MEMBERS`).
        """
        notifier = getattr(self, _PIPE_NOTIFIER, None)
        if notifier is not None:
            try:
                notifier.notify()
            except BlockingIOError:  # the pipe is full: the tick thread has wake-ups waiting
                pass

    def fail_waiting_proposals(self, reason) -> int:
        """Fail every proposal waiting in pysyncobj's queue (``__commandsQueue``, set at
        syncobj.py:262, after the attribute scan: read by a method) with ``reason``: its
        callback is told at once, and it is never appended. How many."""
        queue = getattr(self, _COMMANDS_QUEUE)
        failed = 0
        while True:
            try:
                _command, callback = queue.get_nowait()
            except Empty:
                return failed
            failed += 1
            if callable(callback):  # a tuple: a follower's forwarded proposal (leaders only)
                callback(None, reason)

    def _pysyncobj_on_message(self, node, message) -> None:
        """pysyncobj's own handling of a peer's message (``__onMessageReceived``)."""
        SyncObj._SyncObj__onMessageReceived(self, node, message)

    # -- overrides, each handing its decision to a hook -----------------------------------

    @_replaces("syncobj.py:611")
    def _onTick(self, timeToWait=0.0) -> None:  # noqa: N802, N803 - pysyncobj's names
        """Wraps ``_onTick`` (syncobj.py:611), every tick of the node (the tick thread's,
        syncobj.py:593, or ``doTick``'s): :meth:`_before_tick` runs first, before a
        follower whose election deadline passed stands for election (:635), and says
        whether it may. If not, the tick is held: pysyncobj's look at the deadline finds
        one that never passes. pysyncobj reads the clock again for that look, after work
        that takes time (:613-632), so a deadline that was ahead as the tick began may
        have passed by then."""
        self._stand_held = not self._before_tick()
        try:
            super()._onTick(timeToWait)
        finally:
            self._stand_held = False

    @_hook
    def _before_tick(self) -> bool:
        """Hook: a tick begins. Whether a follower whose ``election_deadline`` has passed
        may stand for election in it."""
        return True

    @_replaces("syncobj.py:909")
    def _SyncObj__onMessageReceived(self, node, message) -> None:  # noqa: N802 - pysyncobj's name
        """Wraps ``__onMessageReceived`` (syncobj.py:909), the transport's callback for every
        message from a peer (set at :213), which :meth:`_on_message` sees first: the shell
        takes its keep-alives, applies the append rule to appends and drops answers of
        another term before pysyncobj handles them, and keeps acks from moving a next
        index back after."""
        self._on_message(node, message)

    @_hook
    def _on_message(self, node, message) -> None:
        """Hook: a peer's message. Pass on what pysyncobj should handle, as it should see
        it, to :meth:`_pysyncobj_on_message`."""
        self._pysyncobj_on_message(node, message)

    @_replaces("syncobj.py:1098")
    def _SyncObj__sendNextNodeIdx(self, node, reset=False, nextNodeIdx=None, success=False):  # noqa: N802, N803
        """Replaces ``__sendNextNodeIdx`` (syncobj.py:1098), a follower's answer to the
        leader's append or install (``next_node_idx``, sent from syncobj.py:969-1025), with
        :meth:`_answer_leader`'s: the shell syncs the journal before a success, names the
        term in the answer, answers an install from the snapshot's index and withholds the
        success of an install that failed."""
        self._answer_leader(node, reset=reset, next_index=nextNodeIdx, success=success)

    @_hook
    def _answer_leader(self, node, reset: bool, next_index: int | None, success: bool) -> None:
        """Hook: send the leader ``node`` this follower's answer; ``next_index`` None means
        the one after the log's last entry."""
        SyncObj._SyncObj__sendNextNodeIdx(self, node, reset, next_index, success)

    @_replaces("syncobj.py:492")
    def _applyCommand(self, command, callback, commandType=None) -> None:  # noqa: N802, N803
        """Wraps ``_applyCommand`` (syncobj.py:492), where every proposal starts: this node's
        own (``callback`` is its proposer's) or one a peer forwarded (syncobj.py:1039-1041:
        ``(node, request id)``, or None when the peer wants no answer). The shell refuses
        forwarded proposals (a deposed master's) and a halted node's own; one that
        :meth:`_refuses_proposal` refuses is denied as pysyncobj denies a proposal itself
        (``__callErrCallback``, syncobj.py:1085): ``REQUEST_DENIED`` to the callback, or in
        an ``apply_command_response`` to the peer.
        """
        if self._refuses_proposal(forwarded=not callable(callback)):
            self._call_err_callback(FAIL_REASON.REQUEST_DENIED, callback)
            return
        super()._applyCommand(command, callback, commandType)

    @_hook
    def _refuses_proposal(self, forwarded: bool) -> bool:
        """Hook: whether to deny a proposal, ``forwarded`` by a peer or this node's own."""
        return False

    @_replaces("syncobj.py:503")
    def _checkCommandsToApply(self) -> None:  # noqa: N802 - pysyncobj's name
        """Wraps ``_checkCommandsToApply`` (syncobj.py:503), where every tick a leader
        appends the proposals waiting in its queue to its log and sends them to the
        followers (a follower forwards them to its leader); :meth:`_before_proposals` runs
        before, :meth:`_proposals_appended` after, where the leader syncs what it appended."""
        self._before_proposals()
        super()._checkCommandsToApply()
        self._proposals_appended()

    @_hook
    def _before_proposals(self) -> None:
        """Hook: the tick is about to append (as leader) or forward the waiting proposals."""

    @_hook
    def _proposals_appended(self) -> None:
        """Hook: the tick's proposals are in the leader's log and sent."""

    @_replaces("syncobj.py:1215")
    def _SyncObj__onBecomeLeader(self):  # noqa: N802 - pysyncobj's name
        """Wraps ``__onBecomeLeader`` (syncobj.py:1215), where a node that won its election
        appends the no-op of its term and sends it; :meth:`_noop_appended` runs after. The
        no-op is not a proposal, so :meth:`_proposals_appended` never sees it, and pysyncobj
        applies it itself, not through the shell's apply."""
        SyncObj._SyncObj__onBecomeLeader(self)
        self._noop_appended()

    @_hook
    def _noop_appended(self) -> None:
        """Hook: a new leader's no-op is in its log and sent."""

    @_replaces("syncobj.py:1251")
    def _SyncObj__sendAppendEntries(self):  # noqa: N802 - pysyncobj's name
        """Wraps ``__sendAppendEntries`` (syncobj.py:1251), where the leader sends every
        connected follower what it lacks, to leave out the followers
        :meth:`_followers_held_back` names (a shipment that waits for its connection).
        pysyncobj sends only to ``connected_nodes``, so they are taken out of it meanwhile,
        and their snapshot shipments are kept (pysyncobj cancels the shipment of a follower
        it finds disconnected, syncobj.py:1260; the serializer keeps a paused one).

        A follower whose shipment cannot go on (the serializer raises
        :class:`ShipmentWaits`) is left out too, and the sends are made again: pysyncobj
        would ask for its next chunk again at once, for a heartbeat's time (:1308-1326).
        The followers sent to before it are sent to once more, with nothing new but a
        heartbeat."""
        held_back = self._followers_held_back()
        while True:
            try:
                return self._send_appends_leaving_out(held_back)
            except ShipmentWaits as waits:
                held_back = held_back | {waits.node}

    def _send_appends_leaving_out(self, held_back: frozenset) -> None:
        if not held_back:
            return SyncObj._SyncObj__sendAppendEntries(self)
        self.connected_nodes = self.connected_nodes - held_back
        try:
            with self.serializer.paused(held_back):
                return SyncObj._SyncObj__sendAppendEntries(self)
        finally:
            self.connected_nodes |= held_back

    @_hook
    def _followers_held_back(self) -> frozenset:
        """Hook: the connected followers this leader sends nothing to this tick."""
        return frozenset()

    @_replaces("syncobj.py:708")
    def _SyncObj__applyLogEntries(self):  # noqa: N802 - pysyncobj's name
        """Wraps ``__applyLogEntries`` (syncobj.py:708), which applies the committed entries
        and, with ``appendEntriesUseBatch`` off, has a leader that applied any send every
        follower an append at once (:731, sent at :691), only to tell the new commit index.
        Unless :meth:`_commit_told_within` says 0, the leader's next append is due within
        that many seconds instead (``__newAppendEntriesTime``, set at :268, read at :691);
        an append sent sooner (a proposal's, :540) carries the commit index and puts the
        next one a heartbeat on (:1252)."""
        applied = SyncObj._SyncObj__applyLogEntries(self)
        within = self._commit_told_within()
        if not applied or within <= 0:
            return applied
        told_by = monotonicTime() + within
        setattr(self, _NEXT_APPEND_AT, min(getattr(self, _NEXT_APPEND_AT), told_by))
        return False

    @_hook
    def _commit_told_within(self) -> float:
        """Hook: how long after it applied entries a leader sends the followers its new
        commit index, unless an append carried it sooner (seconds; 0: at once)."""
        return 0.0

    def next_append_at(self) -> float:
        """When a leader sends its next append, with nothing proposed before (monotonic
        seconds; ``__newAppendEntriesTime``, set at syncobj.py:268, read at :691)."""
        return getattr(self, _NEXT_APPEND_AT)

    def proposals_waiting(self) -> bool:
        """Whether proposals wait in the queue a tick takes them from (:262): a tick takes
        them for up to ``appendEntriesPeriod`` (:506), and leaves the rest to the next."""
        return bool(getattr(getattr(self, _COMMANDS_QUEUE), _QUEUED))

    @_hook
    def _tick_wait(self, longest: float) -> float:
        """Hook: how long the tick thread may wait for a message before its next tick
        (seconds, at most ``longest``)."""
        return longest

    @_replaces("syncobj.py:1421")
    def _SyncObj__tryLogCompaction(self):  # noqa: N802 - pysyncobj's name
        """Wraps ``__tryLogCompaction`` (syncobj.py:1421), pysyncobj's compaction step, every
        tick (syncobj.py:700): it cuts the log after a finished dump, or starts a dump when
        the log is long or old enough or one was forced (``forceLogCompaction``). Skipped on
        a tick when :meth:`_may_compact` says so (halted, or shipping), which may also force
        a dump (the log's byte budget)."""
        if self._may_compact():
            SyncObj._SyncObj__tryLogCompaction(self)

    @_hook
    def _may_compact(self) -> bool:
        """Hook: whether pysyncobj's compaction step runs this tick (it may force a dump)."""
        return True

    @_replaces("syncobj.py:1472")
    def _SyncObj__loadDumpFile(self, clearJournal):  # noqa: N802, N803 - pysyncobj's names
        """Wraps ``__loadDumpFile`` (syncobj.py:1472). pysyncobj loads a dump at start
        (``clearJournal`` False, syncobj.py:626) and after installing a shipped one (True,
        syncobj.py:1024), and clears the journal when told to, or when it does not begin
        with the dump's last two entries (syncobj.py:1489). :meth:`_clears_journal_on_load`
        decides what it is told: the shell keeps what a follower holds past an install.
        :meth:`_dump_loaded` runs after: pysyncobj has just made the dump's membership this
        node's (syncobj.py:1508), which the changes in the log past it must amend."""
        loaded = SyncObj._SyncObj__loadDumpFile(
            self, self._clears_journal_on_load(after_install=clearJournal)
        )
        self._dump_loaded()
        return loaded

    @_hook
    def _dump_loaded(self) -> None:
        """Hook: a dump was loaded (at start, or a shipped one installed)."""

    @_hook
    def _clears_journal_on_load(self, after_install: bool) -> bool:
        """Hook: whether pysyncobj clears the journal however it begins, loading a dump."""
        return after_install

    @_replaces("syncobj.py:1356")
    def _SyncObj__changeCluster(self, request):  # noqa: N802 - pysyncobj's name
        """Wraps ``__changeCluster`` (syncobj.py:1356), where a leader decides whether to
        append a proposed change of the membership: after an entry of its term committed
        (its no-op), and, pysyncobj's intent, not while another change is uncommitted;
        but the index it checks that against is never set (syncobj.py:186 only), so
        :meth:`_may_change_membership` decides that part."""
        if not self._may_change_membership():
            return False
        return SyncObj._SyncObj__changeCluster(self, request)

    @_hook
    def _may_change_membership(self) -> bool:
        """Hook: whether a change of the membership may be appended now."""
        return True

    @_replaces("syncobj.py:1374")
    def _SyncObj__doChangeCluster(self, request, reverse=False):  # noqa: N802 - pysyncobj's name
        """Wraps ``__doChangeCluster`` (syncobj.py:1374), where pysyncobj takes a change of
        the membership as this node's own (or undoes one, ``reverse``) when it appends it
        (:526, :1011), cuts it (:997) or applies it (:889, a restart). A learner that
        becomes a member is fed as one from then on, on the link it has (``addNode`` keeps
        it) and from where it was (pysyncobj starts a member it adds at the log's end with
        nothing matched, :1397-1398). Dropped for a new link, the learner had to dial
        again (``connect_retry_s``) before it heard of its add, and a cluster that needs the
        new member for a majority (one member down) committed nothing meanwhile;
        :meth:`_membership_changed` runs after."""
        node = request[2] if len(request) >= 3 else None
        learner = not reverse and request[0] == "add" and node is not None and node in self.readonly_nodes
        if learner:
            self.readonly_nodes.discard(node)
            fed = self.next_index.get(node), self.match_index.get(node)
        changed = SyncObj._SyncObj__doChangeCluster(self, request, reverse)
        if learner and not changed:
            self.readonly_nodes.add(node)  # still a learner, fed as before
        elif learner and None not in fed:
            self.next_index[node], self.match_index[node] = fed
        self._membership_changed(request, reverse)
        return changed

    @_hook
    def _membership_changed(self, request, reverse: bool) -> None:
        """Hook: a change of the membership was taken (or undone, ``reverse``)."""

    @_replaces("syncobj.py:870")
    def _SyncObj__doApplyCommand(self, command):  # noqa: N802 - pysyncobj's name
        """Wraps ``__doApplyCommand`` (syncobj.py:870), where pysyncobj applies a committed
        entry, and takes a change of the membership again (:887, for its restarts). The
        shell has taken each change when it was appended or, at a start or an install, when
        the dump was loaded (``RaftNode._dump_loaded``): taking an older change again after
        newer ones (a ``rem`` then an ``add`` of one node) would undo the newer, so a
        change is not taken at apply: :meth:`_membership_applied` is told of it instead."""
        change = self._parse_change(command)
        if change is not None:
            self._membership_applied(change)
            return None
        return SyncObj._SyncObj__doApplyCommand(self, command)

    @_hook
    def _membership_applied(self, change) -> None:
        """Hook: a committed change of the membership was applied (its index is applied)."""


# -- TCPTransport -------------------------------------------------------------------------


class TransportSeam(TCPTransport):
    """pysyncobj's TCP transport, the one a node is built with unless simulated."""

    @_replaces("transport.py:189")
    def __init__(self, syncObj, selfNode, otherNodes) -> None:  # noqa: N803 - pysyncobj's names
        """Wraps ``__init__`` (transport.py:189), which connects at once: the handshakes'
        bookkeeping (``_onOutgoingConnected``) is made before."""
        self._unanswered: set = set()  # dialled connections whose handshake has no answer yet
        self._closed_unanswered: dict = {}  # per dialled connection: closed unanswered in a row
        TCPTransport.__init__(self, syncObj, selfNode, otherNodes)

    @_replaces("transport.py:511")
    def addNode(self, node) -> None:  # noqa: N802 - pysyncobj's name
        """Replaces ``addNode`` (transport.py:511), which pysyncobj calls for every member
        it takes (a change, a dump's membership) and the shell for a node it links to
        outside the membership (a learner it feeds, a leader its log lacks: node.py). For
        a node that already has a connection, TCP's would make a new one in its place and
        leave the old, perhaps live, open and unowned for good: that one is kept."""
        if node in self._nodes and node in self._connections:
            self._nodeAddrToNode[node.address] = node
            return
        TCPTransport.addNode(self, node)

    @_replaces("transport.py:258")
    def _createServer(self) -> None:  # noqa: N802 - pysyncobj's name
        """Wraps ``_createServer`` (transport.py:258), which makes the server of the Raft
        address. pysyncobj binds it again every second until it succeeds and swallows each
        failure (transport.py:284), so a node whose Raft address is taken (another process
        on it) waited, never linked, without a word. The server's bind now logs a failure,
        once for each kind, and the bind that succeeds after one."""
        TCPTransport._createServer(self)
        server = self._server
        bind, failed = server.bind, set()
        address = self._syncObj.conf.bindAddress or self._selfNode.address

        def bind_and_say() -> None:
            try:
                bind()
            except OSError as e:
                if e.errno not in failed:
                    failed.add(e.errno)
                    log.error("cannot listen for Raft on %s: %s; trying again every second", address, e)
                raise
            if failed:
                log.warning("listening for Raft on %s", address)

        server.bind = bind_and_say

    # A peer that closes every connection this node dials before answering its handshake
    # cannot read it: another cluster secret, most likely. It logs the refusal; without
    # this, the node with the wrong secret logged nothing. A connection this node gives up
    # on (the peer stopped, its kernel still accepting) counts too: the warning says so.
    @_replaces("transport.py:443")
    def _onOutgoingConnected(self, conn) -> None:  # noqa: N802 - pysyncobj's name
        """Wraps ``_onOutgoingConnected`` (transport.py:443), where a dialled connection
        sends its handshake: noted until the peer answers."""
        if self._syncObj.encryptor:
            self._unanswered.add(conn)
        TCPTransport._onOutgoingConnected(self, conn)

    @_replaces("transport.py:462")
    def _onOutgoingMessageReceived(self, conn, message) -> None:  # noqa: N802 - pysyncobj's name
        """Wraps ``_onOutgoingMessageReceived`` (transport.py:462): the peer answered."""
        self._unanswered.discard(conn)
        self._closed_unanswered.pop(conn, None)
        TCPTransport._onOutgoingMessageReceived(self, conn, message)

    @_replaces("transport.py:481")
    def _onDisconnected(self, conn) -> None:  # noqa: N802 - pysyncobj's name
        """Wraps ``_onDisconnected`` (transport.py:481): a dialled connection that ended
        before its handshake was answered counts; at ``UNANSWERED_WARN`` in a row, a
        warning (once, until one is answered).

        A snapshot shipment to the peer ends with its link: the chunks in the connection's
        write buffer are lost with it (tcp_connection.py:167), and pysyncobj ends the
        shipment only once a tick's sends find the peer disconnected (syncobj.py:1260). A
        link dialled again before that would go on with the chunk after the lost ones."""
        node = self._connToNode(conn)
        if node is not None:
            self._syncObj.serializer.link_lost(node)
        if conn in self._unanswered:
            self._unanswered.discard(conn)
            closed = self._closed_unanswered
            closed[conn] = closed.get(conn, 0) + 1
            if closed[conn] == UNANSWERED_WARN:
                node = self._connToNode(conn)
                log.warning(
                    "the last %d Raft connections this node opened to %s ended before the peer answered "
                    "their handshake: is cluster_secret the same on both nodes? (Or the node there "
                    "is not answering: stopped, overloaded, not a node of this cluster.)",
                    UNANSWERED_WARN,
                    getattr(node, "address", "a peer"),
                )
        TCPTransport._onDisconnected(self, conn)


# -- TcpConnection ------------------------------------------------------------------------


class ConnectionSeam(TcpConnection):
    """pysyncobj's ``TcpConnection`` with a hook for each step the Raft link does its own
    way; ``WireConnection`` (wire.py) and ``BoundedTcpConnection`` (bounded_frames.py)
    override them:

    ======================================  ============================================
    hook (default: pysyncobj's behaviour)   called from the override of
    ======================================  ============================================
    ``_send_some() -> bool``                ``__processSend``, tcp_connection.py:239
    ``_read_some() -> bool``                ``__processRead``, tcp_connection.py:261
    ``_parse_message()``                    ``__processParseMessage``, tcp_connection.py:277
    ======================================  ============================================

    pysyncobj sets a new ``bytes()`` buffer with every connection and disconnect
    (tcp_connection.py:125, :167), which a hook may replace through the accessors.
    """

    write_buffer = _Member("_TcpConnection__writeBuffer", "tcp_connection.py:69", settable=True)
    read_buffer = _Member("_TcpConnection__readBuffer", "tcp_connection.py:68", settable=True)
    sock = _Member("_TcpConnection__socket", "tcp_connection.py:67")
    _poller = _Member("_TcpConnection__poller", "tcp_connection.py:72")

    # pysyncobj's send step: sends what the socket takes of the write buffer, now
    try_send = _Method("_TcpConnection__trySendBuffer", "tcp_connection.py:232")
    _process_connection = _Method("_TcpConnection__processConnection", "tcp_connection.py:176")

    def watch_writable(self) -> None:
        """Have the poller call pysyncobj's handler when the socket takes more, as it does
        for a connection being made (tcp_connection.py:136). pysyncobj's handler sends
        what is buffered on the writable event and stops watching for it once the buffer is
        empty (tcp_connection.py:204-211)."""
        events = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR
        self._poller.subscribe(self.fileno(), self._process_connection, events)

    @_replaces("tcp_connection.py:239")
    def _TcpConnection__processSend(self) -> bool:  # noqa: N802 - pysyncobj's name
        """Replaces ``__processSend`` (tcp_connection.py:239), one send of the write buffer's
        front to the socket (True while it should go on), with :meth:`_send_some`'s: the
        link's buffer is a bytearray consumed in place (pysyncobj copies what is left)."""
        return self._send_some()

    @_hook
    def _send_some(self) -> bool:
        """Hook: send what the socket takes of the write buffer's front."""
        return TcpConnection._TcpConnection__processSend(self)

    @_replaces("tcp_connection.py:261")
    def _TcpConnection__processRead(self) -> bool:  # noqa: N802 - pysyncobj's name
        """Wraps ``__processRead`` (tcp_connection.py:261), one read from the socket into the
        read buffer (True while it should go on), in :meth:`_read_some`: the link reads into
        a bytearray, and drops a connection whose next frame claims too much."""
        return self._read_some()

    @_hook
    def _read_some(self) -> bool:
        """Hook: read once from the socket into the read buffer."""
        return TcpConnection._TcpConnection__processRead(self)

    @_replaces("tcp_connection.py:277")
    def _TcpConnection__processParseMessage(self):  # noqa: N802 - pysyncobj's name
        """Replaces ``__processParseMessage`` (tcp_connection.py:277), the next whole message
        in the read buffer, taken off it (None until there is one), with
        :meth:`_parse_message`'s: the link's sealed frames, within bounds."""
        return self._parse_message()

    @_hook
    def _parse_message(self):
        """Hook: the next whole message in the read buffer, or None."""
        return TcpConnection._TcpConnection__processParseMessage(self)


# -- the contract: what the seam reaches, derived from the classes above ------------------


def replaced(seam: type) -> dict[str, str]:
    """The methods ``seam`` overrides, each with the line of the upstream one."""
    return {name: fn.replaces for name, fn in vars(seam).items() if hasattr(fn, "replaces")}


def reached(seam: type, kind: type) -> dict[str, str]:
    """The upstream names ``seam``'s accessors of ``kind`` (:class:`_Member`,
    :class:`_Method`) reach, each with its line."""
    return {v.mangled: v.where for v in vars(seam).values() if isinstance(v, kind)}


def hooks(seam: type) -> tuple[str, ...]:
    """The hooks of ``seam``, which the shell's class overrides."""
    return tuple(name for name, fn in vars(seam).items() if getattr(fn, "hook", False))


# The public API the shell and its tests call, listed so that a release without one is
# refused by name too (doTick and _doDestroy: the in-process tests tick and crash nodes).
_SYNCOBJ_API = (
    "_isLeader",
    "_getLeader",
    "_doDestroy",
    "transferLeadership",
    "addOnTickCallback",
    "isNodeConnected",
    "doTick",
    "forceLogCompaction",
    "raftCommitIndex",
    "raftCurrentTerm",
    "raftLastApplied",
    "otherNodes",
)
_CONNECTION_API = ("send", "disconnect", "getSendBufferSize", "fileno", "state")
# The serializer the shell makes (snapshot_stream.py's ShippingSerializer) overrides the
# first two and relies on the others.
_SERIALIZER_API = ("cancelTransmisstion", "getTransmissionData", "setTransmissionData", "deserialize")
# dial_node.py's DialNode overrides the first two (a peer dialled at another address).
_NODE_API = ("ip", "port", "address")
# Members of the transport: send_backlog reads the connections. (TransportSeam's
# _createServer reads _server, _syncObj and _selfNode of the TCP transport alone, right
# after pysyncobj's own made them; check_node checks a node's transport, a simulated one
# in sim/, which has none of them.)
_TRANSPORT_MEMBERS = ("_connections",)

# Methods the shell overrides or calls, by the class that must define them.
METHODS: dict[type, tuple[str, ...]] = {
    SyncObj: (*replaced(SyncObjSeam), *reached(SyncObjSeam, _Method), *_SYNCOBJ_API),
    Serializer: _SERIALIZER_API,
    TCPNode: _NODE_API,
    TcpConnection: (*replaced(ConnectionSeam), *reached(ConnectionSeam, _Method), *_CONNECTION_API),
    TCPTransport: tuple(replaced(TransportSeam)),
}

# Members the shell reads or sets, by the class whose objects must hold them.
MEMBERS: dict[type, tuple[str, ...]] = {
    SyncObj: (*reached(SyncObjSeam, _Member), _COMMANDS_QUEUE, _NEXT_APPEND_AT),
    TcpConnection: tuple(reached(ConnectionSeam, _Member)),
    TCPTransport: _TRANSPORT_MEMBERS,
    FastQueue: (_QUEUED,),
}

# Members read where pysyncobj has them, and done without where it has not: not checked.
OPTIONAL_MEMBERS: dict[type, tuple[str, ...]] = {SyncObj: (_PIPE_NOTIFIER,)}

# Module globals the shell swaps: pysyncobj's parts (_pysyncobj_parts), its pickle
# protocol, and the connection class of both places that make connections.
GLOBALS: dict[object, tuple[str, ...]] = {
    syncobj_module: ("createJournal", "Serializer", "getEncryptor"),
    raft_pickle: ("__protocol",),
    tcp_server_module: ("TcpConnection",),
    transport_module: ("TcpConnection",),
}


def check_pysyncobj() -> None:
    """Refuse a pysyncobj whose version or internals the shell was not checked against."""
    version = VERSION
    if version not in TESTED_VERSIONS:
        raise UnsupportedPysyncobjError(
            f"pysyncobj {version} is installed; this Horologe was checked against "
            f"{', '.join(sorted(TESTED_VERSIONS))} only, and relies on its internals "
            f"(cluster/raft/seam.py). Install pysyncobj=={max(TESTED_VERSIONS)}."
        )
    missing = [f"{c.__name__}.{n}" for c, names in METHODS.items() for n in names if n not in vars(c)]
    missing += [f"{m.__name__}.{n}" for m, names in GLOBALS.items() for n in names if not hasattr(m, n)]
    bare = TcpConnection(None)  # no socket: its __init__ only sets members
    missing += [f"TcpConnection().{n}" for n in MEMBERS[TcpConnection] if not hasattr(bare, n)]
    missing += [f"FastQueue().{n}" for n in MEMBERS[FastQueue] if not hasattr(FastQueue(0), n)]
    if missing:
        raise UnsupportedPysyncobjError(
            f"pysyncobj {version} lacks what the Raft shell overrides or reaches: {', '.join(missing)}"
        )


def check_node(node: SyncObj, journal: object, serializer_type: type) -> None:
    """Refuse a built node that does not hold the shell's own parts, or lacks a member."""
    missing = [name for name in MEMBERS[SyncObj] if not hasattr(node, name)]
    transport = getattr(node, "_SyncObj__transport", None)
    missing += [f"transport.{n}" for n in MEMBERS[TCPTransport] if not hasattr(transport, n)]
    if missing:
        raise UnsupportedPysyncobjError(f"a pysyncobj node lacks {', '.join(missing)}")
    if node._SyncObj__raftLog is not journal:
        raise UnsupportedPysyncobjError("pysyncobj did not take the shell's journal (createJournal)")
    if not isinstance(node._SyncObj__serializer, serializer_type):
        raise UnsupportedPysyncobjError("pysyncobj did not take the shell's serializer (Serializer)")
