"""A topic's pending message found by its producer key: the pending list's ``?key=``.

The writer finds the id the key index holds for ``(topic, key)`` (storage/key_index.py,
asked through writer_questions.py); the rest is read here, from a committed state, the
way a cancel or a reschedule by key goes on from that id (apply_messages.resolve_targets): to the
original the id answers to (a rescheduled copy answers to its original's), then to the
place the message lives now. The message is listed, under its original id and at the
slot its current place fires at, when that place is scheduled. A key that names nothing,
or a message cancelled, delivered, dropped, dead-lettered or removed by retention, lists
nothing.
"""

from __future__ import annotations

from horologe.storage import MessageExpiredError, MessageId
from horologe.storage.delay_index import slot_ms
from horologe.storage.store_reads import StoreReads

from .committed_reads import SCHEDULED, message_state, watermark
from .pending_list import PendingPage

NOTHING = PendingPage([], [], None)


def pending_by_key(reads: StoreReads, topic: str, found: MessageId | None) -> PendingPage:
    """A page of the one message the key index's ``found`` names, if it is pending (else none)."""
    if found is None:
        return NOTHING
    try:
        place = reads.current_place(reads.original_id(found))
        if message_state(reads, place, watermark(reads)) != SCHEDULED:
            return NOTHING
        entry = reads.index_entry(place)
    except MessageExpiredError:
        return NOTHING
    if reads.topic_name(int(entry["topic_id"])) != topic:  # the index checked it: a copy keeps its topic
        return NOTHING
    return PendingPage([place], [int(slot_ms(place.hour, entry))], None)
