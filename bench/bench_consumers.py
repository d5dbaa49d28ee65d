"""Consumer figures (issue #5): tag-filter scan rate, end-to-end consume rate.

    python bench/bench_consumers.py [--only scan,consume] [--entries 1000000] [--messages 100000]

* scan     the Bloom prefilter over ``--entries`` ready-log entries: numpy alone, and
           reading the ready log from storage in the pull's 64k-entry chunks
* pull     what a pull of a hot second costs the master in-process (a real store and
           state machine, no Raft, no HTTP): pulls of 500 of ``--messages`` due at the
           same millisecond, answered in msgpack by messages and by columns; and what
           the SDK spends decoding each
* consume  pull (max 1,000) + ack by 4 consumers of one group on 3 real nodes,
           ``--messages`` 200-byte messages already delivered
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
import time

import numpy as np
import repo_root  # noqa: F401 - the repo root on sys.path, for testkit

from horologe.client import Client
from horologe.client.calls import MSGPACK, parse_body
from horologe.client.core import to_pulled
from horologe.cluster import PRODUCE, SYNC
from horologe.node.consumers.receipts import Receipts
from horologe.node.consumers.service import SCAN_CHUNK, Consumers, TagFilter
from horologe.node.consumers.wire import as_columns, as_msgpack
from horologe.storage import Message, ReadyEntry, Storage, StorageConfig, tags_signature
from horologe.wheel import ALL, Watermark
from testkit.process_cluster import CLIENT, Cluster


def bench_scan(root: str, entries: int) -> None:
    rng = np.random.default_rng(5)
    vocab = [f"tag{k}" for k in range(50)]
    sigs = [tags_signature([vocab[i] for i in rng.choice(50, 2, replace=False)]) for _ in range(1000)]
    filt = TagFilter.parse("tag7||tag11")
    with Storage(os.path.join(root, "scan"), StorageConfig(fsync=False)) as s:
        for first in range(0, entries, 100_000):
            batch = [
                ReadyEntry(0, k, sigs[k % 1000], 0, 0) for k in range(first, min(entries, first + 100_000))
            ]
            s.apply(first // 100_000 + 1, lambda tx, b=batch: tx.append_ready("t", b))
        s.read_ready("t")  # verify checksums once, as a node does on first read
        all_sigs = s.read_ready("t")["tag_sig"]
        t0 = time.perf_counter()
        hits = int(filt.prefilter(all_sigs).sum())
        pure = entries / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        total = 0
        for start in range(0, entries, SCAN_CHUNK):
            total += int(filt.prefilter(s.read_ready("t", start, start + SCAN_CHUNK)["tag_sig"]).sum())
        chunked = entries / (time.perf_counter() - t0)
    assert total == hits
    print(f"scan     prefilter over {entries:,} entries, numpy only:           {pure:>14,.0f} entries/s")
    print(
        f"scan     prefilter reading the ready log in {SCAN_CHUNK:,} chunks: {chunked:>14,.0f} entries/s"
        f"  ({hits:,} candidates)"
    )


def bench_pull(root: str, messages: int, batch: int = 500) -> None:
    from tests.node.local_log import LocalLog  # the node-component harness: proposals apply at once

    t = 1_767_225_600_000
    now = [t]
    log = LocalLog(os.path.join(root, "pull"), lambda: now[0])
    try:

        async def run() -> list[bytes]:
            for first in range(0, messages, 10_000):
                n = min(10_000, messages - first)
                await log.propose(PRODUCE, messages=[Message("t", b"b" * 200, t, t) for _ in range(n)])
            now[0] = t + 1
            log.ws = lambda: Watermark(t, ALL)
            await log.propose(SYNC)
            answers = {}
            for wire in (as_msgpack, as_columns):  # each layout leases the hot second anew
                consumers = Consumers(log.view, log.propose, log.clock, (1000,), 50, Receipts("bench"))
                t0 = time.perf_counter()
                answers[wire.__name__] = [
                    wire(await consumers.pull(wire.__name__, "t", None, batch, 0, 30_000), 0)
                    for _ in range(0, messages, batch)
                ]
                per = (time.perf_counter() - t0) / messages * 1e6
                print(f"pull     master, pull {batch} + answer {wire.__name__ + ':':<12} {per:>8.2f} us/msg")
            return answers

        answers = asyncio.run(run())
    finally:
        log.close()
    for name, bodies in answers.items():
        t0 = time.perf_counter()
        got = sum(len(to_pulled(parse_body(b, MSGPACK), None)[0]) for b in bodies)
        assert got == messages, got
        per = (time.perf_counter() - t0) / messages * 1e6
        print(f"pull     SDK, decode the answers {name + ':':<12}       {per:>8.2f} us/msg")


def bench_consume(root: str, messages: int, consumers: int = 4) -> None:
    c = Cluster(os.path.join(root, "consume"), 3)
    c.start_all()
    try:
        client = Client([c.url(i) for i in c.indexes], CLIENT)
        body = "b" * 200
        for first in range(0, messages, 1000):
            client.produce_batch(
                [{"topic": "work", "body": body} for _ in range(min(1000, messages - first))]
            )
        while c.status(c.wait_leader())["pending"] > 0:
            time.sleep(0.2)
        done = [0] * consumers

        def consumer(k: int) -> None:
            cl = Client([c.url(i) for i in c.indexes], CLIENT)
            idle = 0
            while idle < 3:
                batch = cl.pull("work", "bench", max=1000, wait_ms=200)
                if not batch:
                    idle += 1
                    continue
                idle = 0
                cl.ack("work", "bench", [m.receipt for m in batch])
                done[k] += len(batch)

        t0 = time.monotonic()
        ts = [threading.Thread(target=consumer, args=(k,)) for k in range(consumers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        elapsed = time.monotonic() - t0 - 0.6  # the idle polls that ended each consumer
        print(
            f"consume  {sum(done):,} msgs, {consumers} consumers, pull 1,000 + ack: "
            f"{sum(done) / elapsed:>10,.0f} msg/s",
            flush=True,
        )
    finally:
        c.stop_all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="scan,pull,consume")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--messages", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as root:
        if "scan" in args.only:
            bench_scan(root, args.entries)
        if "pull" in args.only:
            bench_pull(root, args.messages)
        if "consume" in args.only:
            bench_consume(root, args.messages)


if __name__ == "__main__":
    main()
