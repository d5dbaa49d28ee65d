"""pysyncobj is pinned, and a node refuses to start on a version or build it was not
checked against: a renamed private method would otherwise silently stop being overridden
(followers would acknowledge entries before they are on disk)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from pysyncobj.syncobj import SyncObj
from pysyncobj.version import VERSION

from horologe import cli
from horologe.cluster.errors import UnsupportedPysyncobjError
from horologe.cluster.raft import seam
from horologe.cluster.raft.seam import TESTED_VERSIONS, check_node, check_pysyncobj
from horologe.cluster.raft.snapshot_stream import ShippingSerializer

from .ticked import crash, ticked_node

ROOT = Path(__file__).resolve().parents[2]


def test_the_dependency_is_pinned_to_the_tested_version_and_that_is_installed():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("pysyncobj")]
    match = re.fullmatch(r"pysyncobj==([\d.]+)", pin)
    assert match, f"pysyncobj must be pinned exactly, not {pin!r}"
    assert match.group(1) in TESTED_VERSIONS
    assert VERSION == match.group(1)
    check_pysyncobj()


def test_an_untested_version_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(seam, "VERSION", "0.3.18")
    with pytest.raises(UnsupportedPysyncobjError, match=r"0\.3\.18 is installed.*pysyncobj==0\.3\.17"):
        check_pysyncobj()


def test_a_renamed_method_is_refused_by_name(monkeypatch):
    monkeypatch.delattr(SyncObj, "_SyncObj__sendNextNodeIdx")
    with pytest.raises(UnsupportedPysyncobjError, match=r"SyncObj\._SyncObj__sendNextNodeIdx"):
        check_pysyncobj()


def test_a_node_refuses_to_start_on_it(tmp_path, monkeypatch):
    monkeypatch.setattr(seam, "VERSION", "0.4.0")
    with pytest.raises(UnsupportedPysyncobjError):
        ticked_node(tmp_path)


def test_the_node_command_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(seam, "VERSION", "0.4.0")
    out = CliRunner().invoke(cli.main, ["node", "--insecure-dev", "--data-dir", str(tmp_path)])
    assert out.exit_code == 1
    assert out.output.startswith("Error: pysyncobj 0.4.0 is installed")
    assert "Traceback" not in out.output


def test_a_node_without_the_shells_parts_is_refused(tmp_path):
    node = ticked_node(tmp_path)
    try:
        check_node(node, node._journal, ShippingSerializer)
        with pytest.raises(UnsupportedPysyncobjError, match="journal"):
            check_node(node, object(), ShippingSerializer)
        with pytest.raises(UnsupportedPysyncobjError, match="serializer"):
            check_node(node, node._journal, type("Other", (), {}))
    finally:
        crash(node)
