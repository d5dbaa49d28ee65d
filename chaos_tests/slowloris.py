"""Other clients' produce latency while a few hundred sockets hang on the master.

    python -m chaos_tests.slowloris [--sockets 300] [--produces 500]

Three nodes as a user starts them (testkit's process cluster, default settings). A
client times ``--produces`` single produces through the SDK, one after another, first
on a quiet master, then while ``--sockets`` connections hang on it: half say nothing,
half drip a header line every 200 ms and never end their request (a slowloris). The
node closes them after ``http_idle_timeout_ms`` (15 s), so the slowloris reopens what
was closed. Prints p50 / p99 / max of each phase and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import threading
import time

import numpy as np

from testkit.process_cluster import Cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD = b"POST /v1/messages HTTP/1.1\r\nHost: n\r\n"


def _hang(host: str, port: int, n: int, stop: threading.Event, seen: list[int]) -> None:
    """Keep ``n`` sockets open on the node, half idle, half dripping headers; appends to
    ``seen`` how many were open after each round."""
    socks: list[socket.socket | None] = [None] * n
    while not stop.is_set():
        for k in range(n):
            try:
                if socks[k] is None:
                    socks[k] = socket.create_connection((host, port), timeout=2)
                    if k % 2:
                        socks[k].sendall(HEAD)
                elif k % 2:
                    socks[k].sendall(b"X-Drip: 1\r\n")
            except OSError:  # closed by the node: reopen on the next round
                socks[k] = None
        seen.append(sum(s is not None for s in socks))
        stop.wait(0.2)
    for s in socks:
        if s is not None:
            s.close()


def _times(cluster: Cluster, master: int, n: int) -> np.ndarray:
    client = cluster.client(master, retry_s=0)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.produce("loris", b"x", deliver_after="1h")
        out.append((time.perf_counter() - t0) * 1000)
    return np.array(out)


def _line(name: str, ms: np.ndarray) -> str:
    p50, p99 = np.percentile(ms, [50, 99])
    return f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {ms.max():.2f} ms over {len(ms)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sockets", type=int, default=300)
    ap.add_argument("--produces", type=int, default=500)
    args = ap.parse_args()
    root = os.path.join(ROOT, "bench", "out", "slowloris")
    shutil.rmtree(root, ignore_errors=True)
    cluster = Cluster(root, 3)
    stop = threading.Event()
    seen: list[int] = []
    try:
        cluster.start_all()
        master = cluster.wait_connected()
        host, port = cluster.url(master).split("//")[1].split(":")
        _times(cluster, master, 50)  # warm: connections, the store's first files
        quiet = _times(cluster, master, args.produces)
        hanger = threading.Thread(target=_hang, args=(host, int(port), args.sockets, stop, seen), daemon=True)
        hanger.start()
        time.sleep(2)  # every socket open and dripping
        during = len(seen)
        loris = _times(cluster, master, args.produces)
        open_while_timed = seen[during:]
    finally:
        stop.set()
        cluster.stop_all()
        cluster.close()
    print(_line("quiet master", quiet))
    print(_line(f"{args.sockets} sockets hanging", loris))
    print(f"sockets open while timed: {min(open_while_timed)}..{max(open_while_timed)} of {args.sockets}")
    print(f"p99 ratio (hanging / quiet): {np.percentile(loris, 99) / np.percentile(quiet, 99):.2f}")


if __name__ == "__main__":
    main()
