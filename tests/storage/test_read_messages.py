"""Reading many messages at once: the same messages as one by one, fewer reads."""

from __future__ import annotations

import os

import pytest

from horologe.storage import MessageId, Storage, StorageConfig, UnknownMessageError
from horologe.storage.errors import CorruptLogError
from horologe.storage.hour_names import hour_name

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


def test_an_unknown_id_among_them_is_refused(tmp_path):
    with _store(tmp_path) as s, pytest.raises(UnknownMessageError):
        s.read_messages([MessageId(HOUR, 5), MessageId(HOUR, 200)])


def test_a_damaged_record_among_them_is_refused(tmp_path):
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
            s.read_messages([MessageId(HOUR, k) for k in range(5, 20)])
