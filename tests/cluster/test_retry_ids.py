"""A retry answers to the id of the message it retries, over every level: a pull's ``id``
and a push's ``Horologe-Message-Id`` stay the same while ``attempt`` grows, so a
receiver that took a push and answered too late can drop the retry by its id."""

from __future__ import annotations

from horologe.cluster import PRODUCE, RETRY, SYNC, Entry, StateMachine
from horologe.node.consumers.wire import message_fields
from horologe.storage import Message, MessageId, Storage, StorageConfig, check_store
from horologe.storage.delay_index import MS_PER_HOUR
from horologe.wheel import Watermark

T = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def shown(sm: StateMachine, topic: str, offset: int) -> dict:
    """The message at ``offset`` of ``topic``'s ready log, as a pull shows it."""
    row = sm.store.read_ready(topic, offset, offset + 1)[0]
    (record,) = sm.store.read_records([MessageId(int(row["hour"]), int(row["global_index"]))])
    return message_fields(record, 0, 0)


def test_a_retry_and_a_retry_of_it_answer_to_the_first_messages_id(tmp_path):
    sm = StateMachine(Storage(str(tmp_path / "s"), StorageConfig(fsync=False)))
    first = sm.apply(1, Entry(PRODUCE, Watermark(T), T, [Message("t", b"x", T + 1, T)]).encode()).ids[0]
    now = T + MS_PER_HOUR
    sm.apply(2, Entry(SYNC, Watermark(now), now).encode())
    assert shown(sm, "t", 0)["id"] == str(first)

    for level, (topic, at) in enumerate((("t", 0), ("%RETRY%g", 0)), 1):  # the message, then its retry
        retry = Entry(RETRY, Watermark(now), now, retries=[("g", topic, at, now + 10)])
        copy = sm.apply(2 + 2 * level, retry.encode()).ids[0]
        now += 20
        sm.apply(3 + 2 * level, Entry(SYNC, Watermark(now), now).encode())
        fields = shown(sm, "%RETRY%g", level - 1)
        assert copy != first  # stored as a message of its own
        assert (fields["id"], fields["attempt"], fields["topic"]) == (str(first), level, "t")
    check_store(sm.store)
    sm.store.close()
