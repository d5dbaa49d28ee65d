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
