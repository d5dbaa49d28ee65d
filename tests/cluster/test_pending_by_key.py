"""cluster/pending_by_key.py: the pending list's ``?key=``, on real storage, read by the
writer's key look-up and, as the node reads it, from a published committed state."""

from __future__ import annotations

import pytest

from horologe.cluster import CANCEL, PRODUCE, SYNC, TRIM, Entry, StateMachine
from horologe.cluster.consumer_groups import ID_HEADER
from horologe.cluster.entries import MOVE
from horologe.cluster.pending_by_key import pending_by_key
from horologe.storage import Message, MessageId, Storage, StorageConfig, check_store
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.storage.store_reader import StoreReader
from horologe.wheel import Watermark

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC
H = T // MS_PER_HOUR


class Node:
    """A writer, and a reader that follows what it publishes after each entry."""

    def __init__(self, path, cfg: StorageConfig | None = None) -> None:
        self.sm = StateMachine(Storage(str(path), cfg or StorageConfig(fsync=False)))
        self.reader = StoreReader(self.sm.store.directory, self.sm.store.config, self.sm.store.published())
        self.ri = 0

    def apply(self, kind, ws: int, *args, **fields):
        self.ri += 1
        res = self.sm.apply(self.ri, Entry(kind, Watermark(ws), ws, *args, **fields).encode())
        assert res.error is None, res.error
        self.reader.follow(self.sm.store.published())
        return res

    def find(self, topic: str, key: str) -> tuple[list[str], list[int]]:
        """(ids, slots) the lookup lists, the same from the writer's store and the reader."""
        found = self.sm.store.lookup_key(topic, key)
        pages = [pending_by_key(reads, topic, found) for reads in (self.sm.store, self.reader)]
        assert pages[0] == pages[1]
        page = pages[0]
        assert page.next_after is None and len(page.ids) <= 1
        stored = self.reader.read_messages(page.ids)
        return [s.message.headers.get(ID_HEADER, str(s.id)) for s in stored], page.slots_ms

    def close(self) -> None:
        self.reader.close()
        check_store(self.sm.store)
        self.sm.store.close()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.close()


def test_a_scheduled_message_is_found_by_its_key_in_its_topic_only(node):
    msgs = [
        Message("t", b"a", T + 10_000, T, key="k1"),
        Message("t", b"b", T + 20_000, T, key="k2"),
        Message("u", b"c", T + 30_000, T, key="k1"),  # the same key in another topic
        Message("t", b"d", T + 40_000, T),
    ]
    a, b, c, _ = node.apply(PRODUCE, T, msgs).ids
    assert node.find("t", "k1") == ([str(a)], [T + 10_000])
    assert node.find("t", "k2") == ([str(b)], [T + 20_000])
    assert node.find("u", "k1") == ([str(c)], [T + 30_000])
    assert node.find("u", "k2") == ([], [])
    assert node.find("t", "no-such-key") == ([], [])
    assert node.find("nowhere", "k1") == ([], [])


def test_cancelled_and_delivered_messages_are_not_pending(node):
    a, b, c = node.apply(
        PRODUCE, T, [Message("t", f"{k}".encode(), T + 1000 * (k + 1), T, key=f"k{k}") for k in range(3)]
    ).ids
    node.apply(CANCEL, T + 1, ids=[str(a)])
    assert node.find("t", "k0") == ([], [])
    node.apply(SYNC, T + 2_500)  # b (T+2000) delivered, c (T+3000) not yet
    assert node.find("t", "k1") == ([], [])
    assert node.find("t", "k2") == ([str(c)], [T + 3_000])
    node.apply(SYNC, T + 3_000)
    assert node.find("t", "k2") == ([], [])


def test_a_moved_message_answers_under_its_original_id_at_its_new_time(node):
    (a,) = node.apply(PRODUCE, T, [Message("t", b"a", T + 10_000, T, key="order-1")]).ids
    times = [T + 3 * MS_PER_HOUR + 5, T + 20_000, T + MS_PER_HOUR + 7]  # another hour, back, a third
    for k, at in enumerate(times):
        by_key = k % 2 == 1  # by id, by key, by id again
        ids, keys = ([], [("t", "order-1")]) if by_key else ([str(a)], [])
        node.apply(MOVE, T + 1 + k, ids=ids, keys=keys, deliver_at=[at])
        assert node.find("t", "order-1") == ([str(a)], [at])
    node.apply(SYNC, T + MS_PER_HOUR + 7)
    assert node.find("t", "order-1") == ([], [])  # delivered, at the last time it moved to


def test_a_key_whose_older_entries_cleaning_appended_again_finds_the_newest_place(tmp_path):
    """Cleaning appends live key entries again after newer ones, so the entry a look-up
    meets first may name an older copy, tombstoned since: it is followed to its original
    and on to where the message lives now, as DELETE and PATCH by key do."""
    node = Node(tmp_path, StorageConfig(fsync=False, key_clean_slack=0))
    (a,) = node.apply(PRODUCE, T, [Message("t", b"a", T + 30 * MS_PER_HOUR, T, key="k")]).ids
    node.apply(MOVE, T + 1, ids=[str(a)], deliver_at=[T + 31 * MS_PER_HOUR])
    node.apply(PRODUCE, T, [Message("t", b"x", T + 1_000, T, key=f"other-{j}") for j in range(10)])
    node.apply(SYNC, T + 26 * MS_PER_HOUR)  # the other keys die: their hour is a day behind
    node.apply(MOVE, T + 26 * MS_PER_HOUR, ids=[str(a)], deliver_at=[T + 32 * MS_PER_HOUR])
    met = node.sm.store.lookup_key("t", "k")
    assert node.sm.store.current_place(met) == met != node.sm.store.current_place(a)  # the case at hand
    assert node.find("t", "k") == ([str(a)], [T + 32 * MS_PER_HOUR])
    node.close()


def test_a_move_then_a_cancel_by_key_lists_nothing(node):
    node.apply(PRODUCE, T, [Message("t", b"a", T + 10_000, T, key="k")])
    node.apply(MOVE, T + 1, keys=[("t", "k")], deliver_at=[T + 2 * MS_PER_HOUR])
    node.apply(CANCEL, T + 2, keys=[("t", "k")])
    assert node.find("t", "k") == ([], [])


def test_a_message_produced_past_due_is_delivered_at_once_so_not_pending(node):
    node.apply(SYNC, T + 5_000)
    node.apply(PRODUCE, T + 5_000, [Message("t", b"a", T + 1_000, T, key="past")])
    (b,) = node.apply(PRODUCE, T + 5_000, [Message("t", b"b", T + 60_000, T, key="ahead")]).ids
    assert node.find("t", "past") == ([], [])
    assert node.find("t", "ahead") == ([str(b)], [T + 60_000])


def test_retention_of_the_hour_lists_nothing(node):
    node.apply(PRODUCE, T, [Message("t", b"a", T + 1_000, T, key="k")])
    node.apply(SYNC, T + 3 * MS_PER_HOUR)
    node.apply(TRIM, T + 3 * MS_PER_HOUR, hour=H + 2, ready=[("t", 1)])
    assert node.find("t", "k") == ([], [])


def test_a_found_id_whose_hour_retention_removed_lists_nothing(node):
    """The writer found it; the state read later no longer holds its hour."""
    (a,) = node.apply(PRODUCE, T, [Message("t", b"a", T + 1_000, T, key="k")]).ids
    node.apply(SYNC, T + 3 * MS_PER_HOUR)
    node.apply(TRIM, T + 3 * MS_PER_HOUR, hour=H + 2, ready=[("t", 1)])
    assert pending_by_key(node.reader, "t", MessageId.parse(str(a))).ids == []
