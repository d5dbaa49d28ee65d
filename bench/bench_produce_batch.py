"""A produce batch of 1,000 messages, in-process (component figures).

    python bench/bench_produce_batch.py [--reps 20]

- the SDK: each item as sent, by ``message_body`` per item and by ``batch_bodies``
  (which builds plain items itself);
- the master: a request's msgpack bytes to an entry's columns, by ``msgpack.unpackb``
  then ``parse_message`` per item and ``MessageColumns.from_messages`` (the path of any
  batch with an item that is not plain) and by ``plain_batch`` (a batch of plain items,
  what the SDK sends, decoded by its typed model);
- every node: applying a produce entry of 1,000 to a store (fsync off), unkeyed and
  keyed, each entry new messages of the same hour; and an entry of one keyed message,
  what a single produce applies.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import msgpack

from horologe.client.core import batch_bodies, fresh_keys, message_body
from horologe.cluster import PRODUCE, Entry, StateMachine
from horologe.node.http.rules.plain_batch import plain_batch
from horologe.storage import Message, MessageColumns, MessageLimits, Storage, StorageConfig
from horologe.storage.message_json import parse_message

N = 1000
DAY_MS = 86_400_000


def _best_ms(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def _apply_ms(keyed: bool, reps: int, n: int = N) -> float:
    with tempfile.TemporaryDirectory(prefix="horologe-bench-") as d:
        machine = StateMachine(Storage(d, StorageConfig(fsync=False)))
        now = time.time_ns() // 1_000_000
        index = 0

        def entry() -> bytes:
            keys = fresh_keys(n) if keyed else [None] * n
            msgs = [Message("bench", b"x" * 200, now + DAY_MS + i, now, key=keys[i]) for i in range(n)]
            return Entry(PRODUCE, machine.ws, now, messages=msgs).encode()

        best = float("inf")
        for _ in range(reps):
            blob = entry()
            index += 1
            t0 = time.perf_counter()
            machine.apply(index, blob)
            best = min(best, time.perf_counter() - t0)
        machine.store.close()
        return best * 1000


def _each_by_message_body(items: list[dict]) -> list[dict]:
    """What ``batch_bodies`` did for every item before it built plain ones itself."""
    keys = iter(fresh_keys(len(items)))
    return [message_body(**{**m, "key": next(keys)}) for m in items]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=20, help="runs of each; the best is printed")
    reps = parser.parse_args().reps
    now = time.time_ns() // 1_000_000
    items = [
        {"topic": "bench", "body": os.urandom(100).hex().encode(), "deliver_at": now + i} for i in range(N)
    ]
    sent = batch_bodies(items)  # keyed, as the master receives them
    raw = msgpack.packb({"messages": sent}, use_bin_type=True)
    limits = MessageLimits()
    rows = [
        ("SDK, message_body per item", lambda: _each_by_message_body(items)),
        ("SDK, batch_bodies", lambda: batch_bodies(items)),
        (
            "master, parse_message per item",
            lambda: MessageColumns.from_messages(
                [parse_message(m, now, limits) for m in msgpack.unpackb(raw)["messages"]]
            ),
        ),
        ("master, plain_batch", lambda: plain_batch(raw, True, now, limits, N)),
    ]
    print(f"a batch of {N:,}, best of {reps}, ms")
    for label, fn in rows:
        print(f"  {label:34} {_best_ms(fn, reps):6.2f}")
    for label, keyed in (("apply, unkeyed", False), ("apply, keyed (as the SDK sends)", True)):
        print(f"  {label:34} {_apply_ms(keyed, reps):6.2f}")
    print(f"a single produce's entry (one keyed message), best of {reps * 10}, ms")
    print(f"  {'apply':34} {_apply_ms(True, reps * 10, 1):6.3f}")


if __name__ == "__main__":
    main()
