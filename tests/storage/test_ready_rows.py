"""Ready-log rows made many at once are byte for byte what one-at-a-time packing writes."""

import numpy as np
import pytest

from horologe.storage.errors import CorruptLogError
from horologe.storage.magic import MAGIC_SIZE
from horologe.storage.ready_log import READY, ReadyEntry, ready_rows, rows_of


def test_rows_made_from_columns_are_the_packed_entries():
    entries = [
        ReadyEntry(
            472_233, gi, (gi * 0x9E3779B97F4A7C15) % 2**64, 1_700_000_000_000 + gi, 1_700_000_000_500, gi % 3
        )
        for gi in range(1000)
    ]
    rows = ready_rows(
        472_233,
        np.arange(1000),
        np.array([e.tag_sig for e in entries], dtype=np.uint64),
        np.array([e.deliver_at_ms for e in entries]),
        1_700_000_000_500,
        np.arange(1000) % 3,
    )
    assert rows.tobytes() == b"".join(e.pack() for e in entries)
    assert rows_of(entries).tobytes() == rows.tobytes()


def test_each_sealed_row_checks_and_a_changed_one_fails():
    rows = ready_rows(1, np.arange(3), 0, 5, 6)
    raw = bytearray(rows.tobytes())
    for at in range(0, len(raw), READY.size):
        READY.verify_entry(raw[at : at + READY.size], "ready", at)
    raw[READY.size + 4] ^= 1  # the second row's global_index
    with pytest.raises(CorruptLogError, match="entry 0 fails"):
        READY.verify_entry(raw[READY.size : 2 * READY.size], "ready", MAGIC_SIZE)
