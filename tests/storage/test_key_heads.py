"""The key index's heads take memory only for the pages of buckets written."""

from __future__ import annotations

import zlib

import numpy as np

from horologe.storage.key_heads import KeyHeads

PAGE = 4096


def _mapping_kb(array: np.ndarray) -> dict[str, int]:
    """Rss and AnonHugePages, in KiB, of the mappings that hold ``array``'s bytes (an
    allocation may span several: the kernel splits one where huge pages were asked for)."""
    start = array.__array_interface__["data"][0]
    end = start + array.nbytes
    fields = {"Rss": 0, "AnonHugePages": 0}
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo < end and start < hi
            elif inside and head[:-1] in fields:
                fields[head[:-1]] += int(line.split()[1])
    return fields


def test_a_young_index_keeps_few_pages_of_its_heads_resident():
    """64 keys in 2**22 buckets touch at most 64 small pages; in huge pages, zeroed 2 MiB
    at a time at their first write, they had made all 32 MiB resident."""
    heads = KeyHeads(1 << 22)
    rng = np.random.default_rng(7)
    heads.absorb(rng.integers(0, 2**63, size=64, dtype=np.uint64), 0)
    kb = _mapping_kb(heads.heads)
    assert kb["AnonHugePages"] == 0
    assert kb["Rss"] <= 64 * PAGE // 1024
    assert np.count_nonzero(heads.heads) == 64 and heads.covered == 64


def test_heads_read_back_from_their_file_are_writable_sparse_zeros_elsewhere():
    heads = KeyHeads(1 << 10)
    heads.absorb(np.array([3, 3 + (1 << 10), 17], dtype=np.uint64), 5)
    again = KeyHeads.from_bytes(heads.to_bytes(), 1 << 10)
    assert again is not None and again.covered == 8
    assert again.heads.tolist() == heads.heads.tolist()
    assert again.heads[3] == 7 and again.heads[17] == 8 and np.count_nonzero(again.heads) == 2
    again.absorb(np.array([4], dtype=np.uint64), 8)
    assert again.heads[4] == 9


def test_marks_read_back_from_their_file_and_a_file_without_them_is_rebuilt():
    heads = KeyHeads(1 << 10)
    hashes = np.array([3 | 5 << 60, 3 | 9 << 60, 17 | 15 << 60], dtype=np.uint64)
    heads.absorb(hashes, 0)
    assert heads.marks[3] == 1 << 5 | 1 << 9 and heads.marks[17] == 1 << 15
    data = heads.to_bytes()
    again = KeyHeads.from_bytes(data, 1 << 10)
    assert again.marks.tolist() == heads.marks.tolist()
    asked = np.array([7 << 60, 9 << 60, 15 << 60], dtype=np.uint64)
    assert again.may_hold(np.array([3, 3, 17]), asked).tolist() == [False, True, True]
    # The layout before marks: the same header, buckets and heads, then the crc.
    used = 2
    old = data[: 8 + 16 + 12 * used]
    old += zlib.crc32(old).to_bytes(4, "little")
    assert KeyHeads.from_bytes(old, 1 << 10) is None


def test_the_next_marks_become_the_marks_once_the_cursor_passes_where_they_began():
    heads = KeyHeads(1 << 4)
    heads.absorb(np.array([1 | 2 << 60], dtype=np.uint64), 0)
    heads.roll(cursor=0, end=1)  # the next marks began at 0: every entry is in them
    assert heads.marks[1] == 1 << 2 and heads.next_marks[1] == 0 and heads.next_from == 1
    heads.absorb(np.array([1 | 3 << 60], dtype=np.uint64), 1)
    heads.roll(cursor=0, end=2)  # entry 0 is still above the cursor: no roll
    assert heads.marks[1] == 1 << 2 | 1 << 3
    heads.roll(cursor=1, end=2)  # entry 0 is gone
    assert heads.marks[1] == 1 << 3
