"""Reading many messages at once: the same messages as one by one, fewer reads."""

from __future__ import annotations

import os

import numpy as np
import pytest

from horologe.storage import MessageId, Storage, StorageConfig, UnknownMessageError
from horologe.storage.delay_index import INDEX
from horologe.storage.errors import CorruptLogError, MessageExpiredError
from horologe.storage.hour_names import hour_name
from horologe.storage.magic import MAGIC_SIZE
from horologe.storage.message import decode_record

from .helpers import H0, HOUR, msg


def _store(tmp_path) -> Storage:
    s = Storage(str(tmp_path / "s"), StorageConfig(fsync=False))
    s.apply(1, lambda tx: tx.append([msg(H0 + k, body=b"m%d" % k) for k in range(200)]))
    s.apply(2, lambda tx: tx.append([msg(H0 + 3_600_000 + k, body=b"n%d" % k) for k in range(50)]))
    return s


@pytest.mark.parametrize(
    "ids",
    [
        [(HOUR, k) for k in range(100, 150)],  # a dense run: one read of each file
        [(HOUR, k) for k in (149, 3, 77, 4)],  # any order, sparse: one by one
        [(HOUR + 1, 7), (HOUR, 9), (HOUR + 1, 8), (HOUR, 10)],  # two hours, order kept
        [(HOUR, 5)],
        [],
    ],
)
def test_read_messages_is_read_message_of_each(tmp_path, ids):
    with _store(tmp_path) as s:
        mids = [MessageId(h, gi) for h, gi in ids]
        assert s.read_messages(mids) == [s.read_message(mid) for mid in mids]
        records = s.read_records(mids)  # what a pull hands on, undecoded
        assert [decode_record(bytes(r), "log", 0, mid) for r, mid in zip(records, mids, strict=True)] == [
            s.read_message(mid) for mid in mids
        ]
        hours = np.array([h for h, _ in ids], dtype=np.int64)  # a pull's, from its ready rows
        gis = np.array([gi for _, gi in ids], dtype=np.int64)
        assert list(map(bytes, s.read_records_at(hours, gis))) == list(map(bytes, records))


def test_an_unknown_id_among_them_is_refused(tmp_path):
    with _store(tmp_path) as s, pytest.raises(UnknownMessageError):
        s.read_messages([MessageId(HOUR, 5), MessageId(HOUR, 200)])


@pytest.mark.parametrize("read", ["read_messages", "read_records"])
def test_a_damaged_record_among_them_is_refused(tmp_path, read):
    with _store(tmp_path) as s:
        first = s.read_message(MessageId(HOUR, 0))
    path = os.path.join(str(tmp_path / "s"), "delay", f"{hour_name(HOUR)}.log")
    with open(path, "r+b") as f:  # flip a byte inside the 11th record's body
        data = f.read()
        at = data.index(b"m10")  # record 10 comes before m100..m109
        f.seek(at)
        f.write(b"X")
    with Storage(str(tmp_path / "s"), StorageConfig(fsync=False)) as s:
        assert s.read_message(MessageId(HOUR, 0)) == first
        with pytest.raises(CorruptLogError):
            getattr(s, read)([MessageId(HOUR, k) for k in range(5, 20)])


@pytest.mark.parametrize("ids", [range(0, 20), (3, 150)])  # dense, sparse
def test_an_index_entry_that_names_another_message_s_record_is_refused(tmp_path, ids):
    """The frame checks out, but it is not the message asked for: the id inside says so."""
    _store(tmp_path).close()
    path = os.path.join(str(tmp_path / "s"), "delay", f"{hour_name(HOUR)}.idx")
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        rows = np.frombuffer(bytes(data), dtype=INDEX.dtype, offset=MAGIC_SIZE).copy()
        rows[["offset", "size"]][3] = rows[["offset", "size"]][4]  # entry 3 points at record 4
        f.seek(MAGIC_SIZE)
        f.write(INDEX.seal(rows).tobytes())
    with Storage(str(tmp_path / "s"), StorageConfig(fsync=False)) as s:
        mids = [MessageId(HOUR, k) for k in ids]
        for read in (s.read_records, s.read_messages):
            with pytest.raises(CorruptLogError, match="index says"):
                read(mids)


def test_records_of_an_hour_retention_removed_are_refused(tmp_path):
    with _store(tmp_path) as s:
        s.apply(3, lambda tx: tx.set_meta("retained_from_hour", HOUR + 1))
        with pytest.raises(MessageExpiredError):
            s.read_records_at(np.array([HOUR + 1, HOUR]), np.array([0, 0]))
        assert len(s.read_records_at(np.array([HOUR + 1]), np.array([0]))) == 1
