"""A partition's worker collects less while it works, and is as it was afterwards.

Whether an object is frozen is asked of the object itself (``frozen``), not read from
``gc.get_freeze_count()``: that count is the whole process's, and any thread that frees
an object made before the freeze lowers it. The Spark session of this suite leaves such a
thread running (PySpark's accumulator server rebinds a list every second), and the count
went 344,779 -> 344,778 between two reads of one test. ``churning`` stands for that
thread here, so that the tests meet it on every run.
"""

from __future__ import annotations

import gc
import threading
import time

import pytest

from horologe.pipeline.worker_gc import THRESHOLDS, fewer_collections


def frozen(obj: object) -> bool:
    """Whether a tracked object sits in the permanent generation: every object of the
    three collected generations is in ``gc.get_objects()``, a frozen one is not."""
    assert gc.is_tracked(obj)
    return not any(o is obj for o in gc.get_objects())


@pytest.fixture(params=["quiet", "churning"])
def other_thread(request):
    """Nothing else running, or a thread that frees, every millisecond, the list it made
    the millisecond before (as PySpark's accumulator server does every second)."""
    if request.param == "quiet":
        yield
        return
    stop = threading.Event()

    def churn() -> None:
        r: list = []
        while not stop.is_set():
            r = []  # frees the last list, which a freeze meanwhile made permanent
            time.sleep(0.001)
        del r

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    yield
    stop.set()
    t.join()


def test_thresholds_and_freeze_hold_inside_and_are_undone_after(other_thread):
    before = gc.get_threshold()
    held = []
    with fewer_collections():
        assert gc.get_threshold() == THRESHOLDS
        assert frozen(held)
    assert gc.get_threshold() == before
    assert not frozen(held)
    assert gc.get_freeze_count() == 0


def test_undone_when_the_work_fails_too(other_thread):
    before = gc.get_threshold()
    held = []
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a row the poster could not post")
    assert gc.get_threshold() == before
    assert not frozen(held)
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_before_is_left_as_it_was(other_thread):
    made_before = []
    gc.freeze()
    try:
        made_after = []
        with fewer_collections():
            pass
        assert frozen(made_before), "the caller's freeze was undone"
        assert not frozen(made_after), "frozen again over the caller's freeze"
    finally:
        gc.unfreeze()
