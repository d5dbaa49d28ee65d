"""What the Raft shell relies on inside pysyncobj, checked before a node starts.

The shell overrides private methods of pysyncobj's classes, reads their private members
and swaps module globals (node.py, wire.py, bounded_frames.py,
snapshot_stream.py). A release that renamed one of them would not fail: an override
would simply never be called again, and followers would, say, acknowledge entries
before they are on disk. So pysyncobj is pinned to one version (pyproject.toml, which
the Dockerfile installs), and a node refuses to start:

* on a version this list was not checked against (:data:`TESTED_VERSIONS`);
* when a name below is missing from the class or module it is taken from
  (:func:`check_pysyncobj`);
* when a node built on it does not hold the shell's own parts (:func:`check_node`).

Adding a version means reading its source against every name here, and running the
suite, the chaos suite and the soak on it.
"""

from __future__ import annotations

import pysyncobj.pickle as raft_pickle
import pysyncobj.syncobj as syncobj_module
import pysyncobj.tcp_server as tcp_server_module
import pysyncobj.transport as transport_module
from pysyncobj.serializer import Serializer
from pysyncobj.syncobj import SyncObj
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.version import VERSION

from ..errors import UnsupportedPysyncobjError

TESTED_VERSIONS = frozenset({"0.3.17"})

# Methods the shell overrides or calls, by the class that must define them.
METHODS: dict[type, tuple[str, ...]] = {
    SyncObj: (
        "_SyncObj__sendNextNodeIdx",  # followers sync before they acknowledge
        "_SyncObj__tryLogCompaction",  # no dump while halted or shipping; the byte budget
        "_SyncObj__sendAppendEntries",  # shipments wait for their connection
        "_SyncObj__loadDumpFile",  # an install keeps the follower's suffix
        "_SyncObj__onMessageReceived",  # what _on_message hands messages on to
        "_SyncObj__getEntries",
        "_SyncObj__getCurrentLogIndex",
        "_SyncObj__generateRaftTimeout",
        "_applyCommand",  # forwarded proposals refused
        "_checkCommandsToApply",  # the leader's own sync
        "_isLeader",
        "_getLeader",
        "_doDestroy",
        "transferLeadership",
        "addOnTickCallback",
        "isNodeConnected",
        "doTick",
    ),
    Serializer: ("cancelTransmisstion", "getTransmissionData", "setTransmissionData", "deserialize"),
    TcpConnection: (
        "_TcpConnection__processSend",
        "_TcpConnection__processRead",
        "_TcpConnection__processParseMessage",
        "_TcpConnection__trySendBuffer",
        "_TcpConnection__processConnection",
    ),
}

# Module globals the shell swaps: pysyncobj's parts (node._pysyncobj_parts), its
# pickle protocol, and the connection class of both places that make connections.
GLOBALS: dict[object, tuple[str, ...]] = {
    syncobj_module: ("createJournal", "Serializer", "getEncryptor"),
    raft_pickle: ("__protocol",),
    tcp_server_module: ("TcpConnection",),
    transport_module: ("TcpConnection",),
}

# Members of a built SyncObj that the shell reads or sets.
MEMBERS = (
    "_SyncObj__raftLog",
    "_SyncObj__serializer",
    "_SyncObj__transport",
    "_SyncObj__connectedNodes",
    "_SyncObj__otherNodes",
    "_SyncObj__raftNextIndex",
    "_SyncObj__raftCommitIndex",
    "_SyncObj__raftState",
    "_SyncObj__raftCurrentTerm",
    "_SyncObj__raftElectionDeadline",
    "_SyncObj__forceLogCompaction",
    "_SyncObj__newAppendEntriesTime",
)


def check_pysyncobj() -> None:
    """Refuse a pysyncobj whose version or internals the shell was not checked against."""
    version = VERSION
    if version not in TESTED_VERSIONS:
        raise UnsupportedPysyncobjError(
            f"pysyncobj {version} is installed; this Horologe was checked against "
            f"{', '.join(sorted(TESTED_VERSIONS))} only, and relies on its internals "
            f"(cluster/raft/contract.py). Install pysyncobj=={max(TESTED_VERSIONS)}."
        )
    missing = [f"{c.__name__}.{n}" for c, names in METHODS.items() for n in names if n not in vars(c)]
    missing += [f"{m.__name__}.{n}" for m, names in GLOBALS.items() for n in names if not hasattr(m, n)]
    if missing:
        raise UnsupportedPysyncobjError(
            f"pysyncobj {version} lacks what the Raft shell overrides or reaches: {', '.join(missing)}"
        )


def check_node(node: SyncObj, journal: object, serializer_type: type) -> None:
    """Refuse a built node that does not hold the shell's own parts, or lacks a member."""
    missing = [name for name in MEMBERS if not hasattr(node, name)]
    if missing:
        raise UnsupportedPysyncobjError(f"a pysyncobj node lacks {', '.join(missing)}")
    if node._SyncObj__raftLog is not journal:
        raise UnsupportedPysyncobjError("pysyncobj did not take the shell's journal (createJournal)")
    if not isinstance(node._SyncObj__serializer, serializer_type):
        raise UnsupportedPysyncobjError("pysyncobj did not take the shell's serializer (Serializer)")
