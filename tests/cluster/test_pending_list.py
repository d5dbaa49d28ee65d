"""cluster/pending_list.py: pages in firing order, none repeated or skipped."""

from __future__ import annotations

from horologe.cluster import pending_list
from horologe.cluster.pending_list import list_pending
from horologe.storage.delay_index import MS_PER_HOUR

from .pending_store import TOPICS, T, built, pending_keys


def pages(store, topic, start, stop, limit) -> list[list[str]]:
    out, after = [], None
    while True:
        page = list_pending(store, topic, start, stop, limit, after)
        out.append([str(i) for i in page.ids])
        assert len(page.ids) == len(page.slots_ms) <= limit
        if page.next_after is None:
            return out
        after = page.next_after


def test_pages_walk_every_pending_message_in_firing_order(tmp_path):
    store = built(tmp_path, 5).store
    for topic in TOPICS:
        keys = pending_keys(store, topic)
        for start, stop, limit in ((0, 2**62, 97), (T + MS_PER_HOUR + 1_234_000, T + 3 * MS_PER_HOUR, 50)):
            want = [mid for slot, _, mid in keys if start <= slot < stop]
            got = pages(store, topic, start, stop, limit)
            assert [m for p in got for m in p] == want, (topic, start)
            assert all(len(p) == limit for p in got[:-1])
        first = list_pending(store, topic, 0, 2**62, 10)
        assert first.slots_ms == [slot for slot, _, _ in keys[:10]]
    assert list_pending(store, "never-used", 0, 2**62, 10).ids == []


def test_a_page_boundary_inside_a_hot_millisecond(tmp_path):
    store = built(tmp_path, 6).store
    keys = pending_keys(store, "a")
    hot = max(set(s for s, _, _ in keys), key=[s for s, _, _ in keys].count)
    at_hot = [mid for slot, _, mid in keys if slot == hot]
    assert len(at_hot) > 20
    got = pages(store, "a", hot, hot + 1, 7)
    assert [m for p in got for m in p] == at_hot


def test_a_small_scan_budget_gives_short_pages_that_still_walk_everything(tmp_path, monkeypatch):
    store = built(tmp_path, 7).store
    monkeypatch.setattr(pending_list, "SCAN_BUDGET", 100)  # fewer than an hour holds
    keys = pending_keys(store, "b")
    got = pages(store, "b", 0, 2**62, 500)
    assert [m for p in got for m in p] == [mid for _, _, mid in keys]
    assert len(got) >= 4  # one call per hour after the first: five hours hold messages
