"""Raft link frames and fixed-size row checksums, in-process (component figures).

    python bench/bench_raft_wire.py [--reps 2000]

Frames: what a node spends to send and to receive a one-entry append and a 200 KB
append (a produce batch of 1,000), as pysyncobj framed them (``Fernet(zlib(pickle))``)
and as cluster/raft/wire.py does (pickle sealed with AES-256-GCM). Rows: the crc32 of
each 40-byte row (36 bytes checked), by one zlib call per row and by
storage/row_crcs.py, at 10 to 10,000 rows.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
import zlib

import numpy as np
from pysyncobj.encryptor import getEncryptor

from horologe.cluster.raft.wire import RaftCipher
from horologe.storage.row_crcs import row_crcs


def _best_us(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best


def _frame_costs(message: dict, reps: int) -> tuple[float, float, float, float]:
    """µs to send and to receive ``message``: pysyncobj's framing, then the sealed one."""
    fernet = getEncryptor("bench-secret")
    sender, receiver = RaftCipher.from_secret("bench-secret"), RaftCipher.from_secret("bench-secret")
    old = fernet.encrypt_at_time(zlib.compress(pickle.dumps(message), 3), 0)
    new = sender.seal(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def old_receive():
        fernet.extract_timestamp(old)
        return pickle.loads(zlib.decompress(fernet.decrypt(old)))

    return (
        _best_us(lambda: fernet.encrypt_at_time(zlib.compress(pickle.dumps(message), 3), 0), reps),
        _best_us(old_receive, reps),
        _best_us(lambda: sender.seal(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)), reps),
        _best_us(lambda: pickle.loads(receiver.open(new)[1]), reps),
    )


def frames(reps: int) -> None:
    body = b'{"order": 12345, "customer": "c-0042", "amount": "19.90"}' * 3
    entry = {"type": "append_entries", "term": 3, "commit_index": 9, "prevLogIdx": 9, "prevLogTerm": 3}
    small = entry | {"entries": [(os.urandom(180) + body, 10, 3)]}
    big = entry | {"entries": [(b"".join(os.urandom(30) + body for _ in range(1000)), 10, 3)]}
    print("message           pysyncobj send / receive µs    sealed send / receive µs")
    for name, message, n in (("one entry", small, reps), ("200 KB append", big, max(1, reps // 50))):
        old_send, old_recv, new_send, new_recv = _frame_costs(message, n)
        print(
            f"{name:16s}  {old_send:10.1f} / {old_recv:8.1f}              {new_send:8.1f} / {new_recv:8.1f}"
        )


def _row_costs(count: int, reps: int) -> tuple[float, float]:
    """µs a row: zlib once per row, then row_crcs."""
    raw = np.random.default_rng(count).integers(0, 256, count * 40, dtype=np.uint8).tobytes()
    mv = memoryview(raw)
    row_crcs(raw, count, 40, 36)  # the tables, once
    loop = _best_us(lambda: [zlib.crc32(mv[at : at + 36]) for at in range(0, count * 40, 40)], reps)
    table = _best_us(lambda: row_crcs(raw, count, 40, 36), reps)
    return loop / count, table / count


def rows(reps: int) -> None:
    print("rows     zlib per row µs/row    row_crcs µs/row")
    for count in (10, 100, 1_000, 10_000):
        loop, table = _row_costs(count, max(1, reps * 10 // count))
        print(f"{count:6d}   {loop:10.3f}             {table:8.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="repetitions of the small cases")
    args = ap.parse_args()
    frames(args.reps)
    rows(args.reps)


if __name__ == "__main__":
    main()
