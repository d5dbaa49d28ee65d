"""Fixtures for tests that run real node processes (integration and pipeline), and a tmpfs
for the tests that fill a real filesystem (marked ``root``)."""

from __future__ import annotations

import os
import subprocess

import pytest

from testkit.process_cluster import Cluster


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report


@pytest.fixture
def make_cluster(tmp_path, request):
    made: list[Cluster] = []

    def make(
        nodes: int = 3, extra_toml: str = "", env=None, start: bool = True, tls: bool = False
    ) -> Cluster:
        c = Cluster(str(tmp_path / f"c{len(made)}"), nodes, extra_toml, env, tls=tls)
        made.append(c)
        if start:
            c.start_all()
        return c

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for c in made:
        c.stop_all()
        c.close()
        if failed:
            for i in c.indexes:
                print(f"----- n{i + 1}.log (tail) -----\n" + c.log(i)[-4000:])


@pytest.fixture
def cluster(make_cluster) -> Cluster:
    return make_cluster()


@pytest.fixture
def mount_tmpfs():
    """``mount_tmpfs(path, size)`` mounts a tmpfs of ``size`` (e.g. "512k") at ``path``,
    unmounted after the test. For the tests marked ``root``, which fill a real filesystem.

    Only a run that is neither root nor CI skips them. As root, or under CI (which runs as
    root), a mount that fails fails the test: a skip there would hide it.
    """
    mounted: list[str] = []

    def mount(path: str, size: str) -> str:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True, text=True
        )
        if r.returncode != 0:
            why = f"cannot mount a tmpfs at {path}: {r.stderr.strip() or r.returncode}"
            if os.geteuid() == 0 or os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(f"{why}; needs root")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", path], check=False)
