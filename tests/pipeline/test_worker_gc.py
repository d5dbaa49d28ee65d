"""A partition's worker collects less while it works, and is as it was afterwards."""

from __future__ import annotations

import gc

import pytest

from horologe.pipeline.worker_gc import THRESHOLDS, fewer_collections


def test_thresholds_and_freeze_hold_inside_and_are_undone_after():
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_undone_when_the_work_fails_too():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a row the poster could not post")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_before_is_left_as_it_was():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with fewer_collections():
            pass
        assert gc.get_freeze_count() == frozen > 0
    finally:
        gc.unfreeze()
