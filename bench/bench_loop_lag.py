"""Event-loop lag of the master under saturating ingest with consumers pulling (issue #23).

    python bench/bench_loop_lag.py [--seconds 15] [--producers 4] [--consumers 2]

Three real node processes. Producers post 1,000 x 200 B batches as fast as the master
takes them (messages due at once); consumers of one group pull (max 500) and ack. At the
end it reads the master's ``/metrics``: ``horologe_loop_lag_p99_seconds`` and ``_max_seconds``, how
late the master's event loop ran a 1 ms timer over its last 10,000 samples (about the
last 10 s). Today's node takes one lock on the loop that the apply thread holds across
fsyncs; this is the figure the single-writer redesign must bring down (target p99 <= 2
ms, max <= 20 ms). A component figure about the node, not an edge figure.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import threading
import time

import repo_root  # noqa: F401 - the repo root on sys.path, for testkit

from horologe.client import Client
from testkit.process_cluster import CLIENT, Cluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="horologe-lag-") as root:
        c = Cluster(root, 3, extra_toml="loop_lag_probe_ms = 1\n")  # as measured before the default became 10
        try:
            c.start_all()
            master = c.wait_connected()
            url = c.url(master)
            stop = time.monotonic() + args.seconds
            counts = {"acked": 0, "consumed": 0}
            lock = threading.Lock()

            def produce() -> None:
                batch = {"messages": [{"topic": "lag", "body": "b" * 200} for _ in range(1000)]}
                client = c.client(master, timeout=30)
                while time.monotonic() < stop:
                    res = client.request("POST", "/v1/messages/batch", batch).body
                    with lock:
                        counts["acked"] += sum(1 for r in res["results"] if "id" in r)

            def consume() -> None:
                client = Client([c.url(i) for i in c.indexes], CLIENT, retry_s=20)
                while time.monotonic() < stop:
                    got = client.pull("lag", "g", max=500, wait_ms=200)
                    if got:
                        client.ack("lag", "g", [m.receipt for m in got])
                        with lock:
                            counts["consumed"] += len(got)

            threads = [threading.Thread(target=produce) for _ in range(args.producers)]
            threads += [threading.Thread(target=consume) for _ in range(args.consumers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            body = c.http.get(f"{url}/metrics", timeout=10).text  # Prometheus text, not JSON
            p99, mx = (1000 * _gauge(body, f"horologe_loop_lag_{k}_seconds") for k in ("p99", "max"))
            acked, consumed = (counts[k] / args.seconds for k in ("acked", "consumed"))
            rates = f"{acked:,.0f} msg/s acked, {consumed:,.0f} consumed"
            print(f"loop lag on the master ({rates}): p99 {p99:.1f} ms, max {mx:.1f} ms")
        finally:
            c.stop_all()


def _gauge(text: str, name: str) -> float:
    m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    if m is None:
        raise SystemExit(f"{name} missing from /metrics")
    return float(m.group(1))


if __name__ == "__main__":
    main()
