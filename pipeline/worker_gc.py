"""Fewer garbage collections on an executor's Python worker while it works a partition.

A worker that validates and posts rows makes several objects a row (the row's dict, the
message, its tags), and keeps a batch of them alive until it is posted. Python collects
its young generation after every 700 new objects, and now and then every generation,
PySpark's modules and ours included. Measured in one process over the rows of
``bench/make_rows.py``: 3.8 us a row to turn rows into batch bodies with Python's
thresholds, 2.7 with these (the node's, ``node/main.py``), a full collection 2 times
instead of 9.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Young, middle and old generation thresholds (gc.set_threshold); Python's are 700, 10, 10.
THRESHOLDS = (10_000, 20, 100)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """What the worker holds on entry leaves every collection (``gc.freeze``), and the
    young generation waits for 10,000 new objects; both undone on exit, since the worker
    process may go on to run other tasks. A freeze made before is left as it was."""
    before = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()
