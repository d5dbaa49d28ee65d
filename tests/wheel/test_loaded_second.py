"""A loaded second takes in late arrivals among the rows it holds, in delivery order."""

from __future__ import annotations

import numpy as np

from horologe.storage import Message, Storage, StorageConfig
from horologe.wheel.loaded_second import LoadedSecond

HOUR = 491_000
SECOND_MS = HOUR * 3_600_000 + 7_000  # second 7 of the hour


def test_arrivals_after_a_refresh_are_merged_into_delivery_order(tmp_path):
    """Each batch lands partly before, among and after the milliseconds already held
    (ties on a millisecond go by arrival); after every refresh the rows are exactly the
    second's messages sorted by (millisecond, localIndex)."""
    rng = np.random.default_rng(7)
    with Storage(str(tmp_path / "s"), StorageConfig(fsync=False)) as s:
        second = LoadedSecond(s, SECOND_MS // 1000)
        for ri in range(1, 9):
            ms = rng.integers(0, 1000, 50 * ri).tolist() + [0, 999, 500, 500]
            batch = [Message("orders", b"x", SECOND_MS + m, SECOND_MS) for m in ms]
            s.apply(ri, lambda tx, b=batch: tx.append(b))
            second.refresh()
            rows = second.rows
            assert second.known == len(rows) == sum(50 * k + 4 for k in range(1, ri + 1))
            order = np.lexsort((rows["local_index"], rows["slot_ms"]))
            assert (order == np.arange(len(rows))).all()
            assert len(np.unique(rows["local_index"])) == len(rows)
