"""Only the seam (cluster/raft/seam.py) reaches inside pysyncobj, and it says where.

Every override of a pysyncobj private method, every name-mangled member read or set and
every swap of a pysyncobj module global is in the seam, which names the upstream line of
each; the contract a node checks before it starts is derived from it. A reach anywhere
else in cluster/raft/ would escape that check, and a hook the node no longer overrides
would silently give back pysyncobj's behaviour.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pysyncobj
import pytest

from horologe.cluster.raft import seam
from horologe.cluster.raft.bounded_frames import BoundedTcpConnection
from horologe.cluster.raft.node import RaftNode
from horologe.cluster.raft.wire import WireConnection

RAFT = Path(__file__).resolve().parents[2] / "cluster" / "raft"
PYSYNCOBJ = Path(pysyncobj.__file__).parent
PRIVATE = re.compile(r"_(?:SyncObj|TcpConnection)__\w+")


def reaches(source: str) -> list[str]:
    """What ``source`` does that only the seam may: name a name-mangled member or method of
    pysyncobj's, or set or delete an attribute of anything imported from pysyncobj (a
    module's global, or a class's), by assignment or by ``setattr``/``delattr``."""
    found = [f"names {name}" for name in sorted(set(PRIVATE.findall(source)))]
    tree = ast.parse(source)
    imported: set[str] = set()  # the names pysyncobj's modules and objects are bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            ours = [a for a in node.names if a.name.split(".")[0] == "pysyncobj"]
            imported |= {a.asname or a.name.split(".")[0] for a in ours}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if node.module.split(".")[0] == "pysyncobj":
                imported |= {a.asname or a.name for a in node.names}

    def from_pysyncobj(expr: ast.expr) -> bool:
        while isinstance(expr, ast.Attribute | ast.Subscript):
            expr = expr.value
        return isinstance(expr, ast.Name) and expr.id in imported

    def targets(node: ast.AST) -> list[ast.expr]:
        if isinstance(node, ast.Assign | ast.Delete):
            return node.targets
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            return [node.target]
        return []

    for node in ast.walk(tree):
        for target in targets(node):
            for part in ast.walk(target):  # a, b.c = ... too
                if isinstance(part, ast.Attribute | ast.Subscript) and from_pysyncobj(part):
                    found.append(f"line {node.lineno} sets {ast.unparse(part)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
            and from_pysyncobj(node.args[0])
        ):
            found.append(f"line {node.lineno} calls {ast.unparse(node)}")
    return found


def test_no_module_but_the_seam_reaches_inside_pysyncobj():
    modules = sorted(RAFT.glob("*.py"))
    assert RAFT / "seam.py" in modules and RAFT / "node.py" in modules
    found = {p.name: reaches(p.read_text()) for p in modules if p.name != "seam.py"}
    assert {name: what for name, what in found.items() if what} == {}


@pytest.mark.parametrize(
    "source",
    [
        "term = node._SyncObj__raftCurrentTerm",
        "def _TcpConnection__processRead(self):\n    pass",
        "import pysyncobj.syncobj as s\ns.createJournal = make",
        "from pysyncobj import syncobj\nsetattr(syncobj, 'Serializer', make)",
        "import pysyncobj.tcp_server\npysyncobj.tcp_server.TcpConnection = C",
        "from pysyncobj.tcp_connection import TcpConnection\nTcpConnection.send = send",
        "import pysyncobj.pickle as p\ndelattr(p, '__protocol')",
        "from pysyncobj.syncobj import SyncObj as S\nS.VERSION += 1",
        "import pysyncobj.syncobj as s\na, s.getEncryptor = 1, make",
        "import pysyncobj.pickle as p\np.__dict__['__protocol'] = 4",
    ],
)
def test_each_kind_of_reach_is_found(source):
    assert reaches(source)


def test_reading_pysyncobj_and_setting_ones_own_are_not_reaches():
    source = (
        "import pysyncobj.syncobj as s\nfrom pysyncobj import SyncObj\n"
        "factory = s.createJournal\nself.next_index[node] = 1\nsetattr(self, 'x', SyncObj)"
    )
    assert reaches(source) == []


def _line(where: str) -> str:
    file, line = where.split(":")
    return (PYSYNCOBJ / file).read_text().splitlines()[int(line) - 1]


def _upstream(name: str) -> str:
    """``_SyncObj__getEntries`` as pysyncobj's source spells it: ``__getEntries``."""
    return "__" + name.split("__", 1)[1] if PRIVATE.fullmatch(name) else name


@pytest.mark.parametrize("cls", [seam.SyncObjSeam, seam.ConnectionSeam, seam.TransportSeam])
def test_each_reach_names_its_upstream_line(cls):
    """The line each override, member and method names is where pysyncobj 0.3.17 defines
    or first sets it (the line numbers are the reader's way into pysyncobj's source)."""
    for name, where in seam.replaced(cls).items():
        assert f"def {_upstream(name)}(" in _line(where), (name, where)
    for name, where in seam.reached(cls, seam._Method).items():
        assert f"def {_upstream(name)}(" in _line(where), (name, where)
    for name, where in seam.reached(cls, seam._Member).items():
        assert f"self.{_upstream(name)} = " in _line(where), (name, where)
    assert seam.replaced(cls)


def test_the_contract_lists_every_private_name_the_seam_uses():
    used = set(PRIVATE.findall((RAFT / "seam.py").read_text()))
    listed = {n for names in (*seam.METHODS.values(), *seam.MEMBERS.values()) for n in names}
    optional = {n for names in seam.OPTIONAL_MEMBERS.values() for n in names}
    assert used - listed == optional


@pytest.mark.parametrize(
    "base, shell",
    [(seam.SyncObjSeam, (RaftNode,)), (seam.ConnectionSeam, (WireConnection, BoundedTcpConnection))],
)
def test_the_shell_overrides_every_hook(base, shell):
    """A hook that the shell's class no longer overrides (renamed on one side only) would
    run pysyncobj's behaviour instead of the shell's rule, and nothing else would fail."""
    hooks = seam.hooks(base)
    assert hooks
    for hook in hooks:
        assert any(hook in vars(cls) for cls in shell), hook
    assert issubclass(shell[-1], base)
