"""Fixtures for tests that run real node processes (integration and pipeline)."""

from __future__ import annotations

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
