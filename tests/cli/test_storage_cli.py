"""``horologe storage check|inspect`` on real data directories."""

from __future__ import annotations

import glob
import os

import pytest
from click.testing import CliRunner

from horologe.cli import main
from horologe.cluster.backup.receive import receive
from horologe.cluster.backup.stream import backup_chunks
from horologe.cluster.raft.backup_point import take_point
from horologe.storage import Message, Storage

H0 = 491_000 * 3_600_000


def make_store(root: str) -> None:
    with Storage(root) as s:
        s.apply(1, lambda tx: tx.append([Message("orders", b"x", H0 + h * 3_600_000, H0) for h in range(3)]))


def test_check_reports_a_healthy_store(tmp_path):
    make_store(str(tmp_path))
    r = CliRunner().invoke(main, ["storage", "check", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "ok: 3 messages in 3 hours" in r.output


def test_check_fails_on_corruption_with_file_and_offset(tmp_path):
    make_store(str(tmp_path))
    logs = sorted(n for n in os.listdir(tmp_path / "delay") if n.endswith(".log"))
    log = os.path.join(tmp_path, "delay", logs[0])
    with open(log, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    r = CliRunner().invoke(main, ["storage", "check", str(tmp_path)])
    assert r.exit_code == 1
    assert "corrupt" in r.output and log in r.output


def test_refuses_a_directory_that_is_not_a_store(tmp_path):
    r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path)])
    assert r.exit_code == 1 and "not a Horologe store" in r.output


def test_inspect_lists_hours(tmp_path):
    make_store(str(tmp_path))
    r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert r.output.count(" 1 message\n") == 3 and "applied index  1" in r.output


def test_inspect_shows_disk_used_and_what_retention_would_reclaim(tmp_path):
    from horologe.cluster import ACK, PRODUCE, SYNC, Entry, StateMachine
    from horologe.storage import StorageConfig
    from horologe.wheel import Watermark

    hour = 3_600_000
    sm = StateMachine(Storage(str(tmp_path), StorageConfig(fsync=False)))
    msgs = [Message("orders", b"x" * 1000, H0 + 1 + k, H0, key=f"k{k}") for k in range(50)]
    sm.apply(1, Entry(PRODUCE, Watermark(H0), H0, msgs).encode())
    sm.apply(2, Entry(SYNC, Watermark(H0 + 2 * hour), H0 + 2 * hour).encode())
    sm.apply(3, Entry(ACK, Watermark(H0 + 2 * hour), H0, acks=[("g", "orders", 0, 40)]).encode())
    sm.store.close()

    def inspect(*args):
        r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path), *args])
        assert r.exit_code == 0, r.output
        return r.output

    out = inspect()  # the watermark is 2 h past the hour: nothing older than 7 days
    assert "disk used" in out and "delay " in out and "ready " in out and "keys " in out
    assert "reclaimable    0 B" in out and "50 live keys" in out
    # a day later by a 1-day retention: g has not passed offset 40, so the ready log stays
    # and so does the hour its entries name
    out = inspect("--retention", "1d", "--now", str(H0 + 26 * hour))
    assert "reclaimable    0 B" in out
    sm = StateMachine(Storage(str(tmp_path), StorageConfig(fsync=False)))
    sm.apply(4, Entry(ACK, Watermark(H0 + 2 * hour), H0, acks=[("g", "orders", 40, 50)]).encode())
    sm.store.close()
    out = inspect("--retention", "1d", "--now", str(H0 + 26 * hour))
    assert "1 hour (" in out and "1 ready segment (" in out and "reclaimable    0 B" not in out
    r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path), "--retention", "soon"])
    assert r.exit_code == 2 and "--retention" in r.output


def test_inspect_and_check_of_a_backup_check_its_files_then_report_and_leave_it_as_it_was(tmp_path):
    with Storage(str(tmp_path / "store")) as s:
        s.apply(1, lambda tx: tx.append([Message("orders", b"x", H0 + k, H0) for k in range(5)]))
        point = take_point(s, "b", lambda i: (b"", i, 3), last_applied=4, term=3)
        receive(backup_chunks(point, "n2", 0), str(tmp_path / "backup"))
    before = sorted(
        (p, os.path.getsize(p)) for p in glob.glob(str(tmp_path / "backup" / "**"), recursive=True)
    )
    r = CliRunner().invoke(main, ["storage", "inspect", str(tmp_path / "backup")])
    assert r.exit_code == 0, r.output
    assert "node n2" in r.output and "Raft index 4 (term 3)" in r.output and "applied index  1" in r.output
    r = CliRunner().invoke(main, ["storage", "check", str(tmp_path / "backup")])
    assert r.exit_code == 0 and "ok: 5 messages" in r.output
    after = sorted(
        (p, os.path.getsize(p)) for p in glob.glob(str(tmp_path / "backup" / "**"), recursive=True)
    )
    assert after == before
    with open(tmp_path / "backup" / "backup.json", "r+b") as f:
        f.write(b"[")
    r = CliRunner().invoke(main, ["storage", "check", str(tmp_path / "backup")])
    assert r.exit_code == 1 and "not a Horologe backup manifest" in r.output


@pytest.mark.parametrize("via_symlink", [False, True])
def test_check_and_inspect_refuse_a_store_whose_node_runs_and_leave_it_as_it_was(tmp_path, via_symlink):
    """Opening a node's store sets a torn tail aside and cuts files back: done under a
    running node, it took away what the node had written and halted it for good. Named
    through a symlink, the store's node folder is where the link leads."""
    import subprocess
    import sys

    store = tmp_path / "n1" / "store"
    make_store(str(store))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from horologe.node.data_lock import lock_data_dir; "
            f"lock_data_dir({str(tmp_path / 'n1')!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with open(store / "commits.log", "ab") as f:
            f.write(b"\0" * 100)  # what a node has written past its last sync point, so far
        before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
        named = store
        if via_symlink:
            named = tmp_path / "elsewhere" / "store"
            named.parent.mkdir()
            named.symlink_to(store)
        for command in ("check", "inspect"):
            r = CliRunner().invoke(main, ["storage", command, str(named)])
            assert r.exit_code == 1, r.output
            assert f"in use by another node process (pid {holder.pid})" in r.output
            assert "stop that node first" in r.output
        assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    finally:
        holder.kill()
        holder.wait()
    r = CliRunner().invoke(main, ["storage", "check", str(store)])
    assert r.exit_code == 0 and "ok: 3 messages" in r.output, r.output
