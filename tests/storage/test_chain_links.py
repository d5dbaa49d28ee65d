"""Chain links of a batch: a small batch is linked in a loop, a large one with sorts; both
give what linking the entries one by one gives."""

from __future__ import annotations

import numpy as np
import pytest

from horologe.storage.chain_links import LOOP_MAX, chain_links


def one_by_one(chains, numbers, heads_before):
    rank, link, last = [], [], {}
    for c, num, head in zip(chains, numbers, heads_before, strict=True):
        rank.append(0 if c not in last else last[c][1] + 1)
        link.append(head if c not in last else last[c][0])
        last[c] = (num, rank[-1])
    return rank, link


@pytest.mark.parametrize("n", [0, 1, 2, LOOP_MAX, LOOP_MAX + 1, 500])
def test_links_are_the_entry_before_in_the_same_chain_or_its_head(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        chains = rng.integers(0, max(1, n // 3 + 1), n)
        numbers = 1_000 + np.arange(n, dtype=np.int64)
        heads_before = rng.integers(-1, 1_000, n)
        rank, link = chain_links(chains, numbers, heads_before)
        assert rank.dtype == link.dtype == np.int64
        assert (rank.tolist(), link.tolist()) == one_by_one(
            chains.tolist(), numbers.tolist(), heads_before.tolist()
        )
