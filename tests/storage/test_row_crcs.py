"""row_crcs (storage/row_crcs.py) gives zlib's crc32 of each row, by table or by loop."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from horologe.storage.row_crcs import TABLE_MIN_ROWS, row_crcs


@pytest.mark.parametrize("count", [0, 1, TABLE_MIN_ROWS - 1, TABLE_MIN_ROWS, 1000, 9000])
@pytest.mark.parametrize(("stride", "n"), [(40, 36), (8, 4), (17, 17)])
def test_each_rows_crc_is_zlibs(count, stride, n):
    rng = np.random.default_rng(count * 131 + stride)
    raw = rng.integers(0, 256, count * stride, dtype=np.uint8).tobytes()
    want = [zlib.crc32(raw[at : at + n]) for at in range(0, count * stride, stride)]
    for buf in (raw, memoryview(raw)):
        got = row_crcs(buf, count, stride, n)
        assert got.dtype == np.uint32 and got.tolist() == want


def test_rows_of_zeros_and_of_ones():
    for fill in (0, 255):
        raw = bytes([fill]) * (200 * 40)
        assert set(row_crcs(raw, 200, 40, 36).tolist()) == {zlib.crc32(bytes([fill]) * 36)}


@pytest.mark.parametrize("count", [10, 1000])
def test_any_buffer_is_read_as_bytes_and_the_last_row_may_end_at_its_n_bytes(count):
    words = np.arange(count * 10, dtype=np.uint32)  # rows of 40 bytes, as uint32 items
    raw = words.tobytes()
    want = [zlib.crc32(raw[at : at + 36]) for at in range(0, count * 40, 40)]
    assert row_crcs(memoryview(words), count, 40, 36).tolist() == want
    assert row_crcs(raw[:-4], count, 40, 36).tolist() == want
    with pytest.raises(ValueError):
        row_crcs(raw[:-5], count, 40, 36)
