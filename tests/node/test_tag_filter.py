"""Tag filtering (docs/storage.md, tag_sig): the Bloom prefilter never drops a match; the exact check
drops the rest."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horologe.node.consumers.service import TagFilter
from horologe.node.errors import InvalidRequest
from horologe.storage import tags_signature

tag = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(st.lists(tag, max_size=5), min_size=1, max_size=60),
    wanted=st.lists(tag, min_size=1, max_size=4),
)
def test_prefilter_has_no_false_negatives_and_exact_check_is_exact(messages, wanted):
    filt = TagFilter.parse("||".join(wanted))
    sigs = np.array([tags_signature(m) for m in messages], dtype=np.uint64)
    maybe = filt.prefilter(sigs)
    for tags, hit in zip(messages, maybe, strict=True):
        exact = bool(set(wanted) & set(tags))
        assert filt.matches(tags) == exact
        if exact:
            assert hit, f"false negative for {tags} vs {wanted}"


def test_false_positives_exist_and_are_removed():
    """Messages with several tags can cover the subscription's bits without the tag."""
    filt = TagFilter.parse("needle")
    sets = [[f"t{k}-{j}" for j in range(8)] for k in range(2000)]
    sigs = np.array([tags_signature(s) for s in sets], dtype=np.uint64)
    fooled = [s for s, hit in zip(sets, filt.prefilter(sigs), strict=True) if hit]
    assert fooled, "no false positive among 2,000 eight-tag messages"
    assert not any(filt.matches(s) for s in fooled)


@pytest.mark.parametrize("expr", [None, "", "*", " * "])
def test_star_matches_everything(expr):
    filt = TagFilter.parse(expr)
    assert filt.prefilter(np.array([0, 5], dtype=np.uint64)).all() and filt.matches(())


def test_bad_expression():
    with pytest.raises(InvalidRequest):
        TagFilter.parse("a||")
