"""Failover under faults: every chaos scenario, and its figures per scenario.

    python bench/bench_chaos.py [--seed 11] [-s SCENARIO ...]

Runs ``python -m chaos_tests.run`` (the suite `make chaos` runs; see docs/chaos.md) into
``bench/out/chaos`` and prints its table: acknowledged messages, lost, duplicates,
redeliveries (unexplained), early, lateness p99 by the master's clock, and time to
recover (the longest stretch without an acknowledged produce from the first fault on).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out", "chaos")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument(
        "-s", "--scenario", action="append", default=[], help="one scenario (repeatable); all by default"
    )
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "chaos_tests.run", "--seed", str(args.seed), "--out", OUT]
    for name in args.scenario:
        cmd += ["-s", name]
    run = subprocess.run(cmd, cwd=ROOT)
    with open(os.path.join(OUT, "REPORT.md")) as f:
        table = [line for line in f if line.startswith("|")]
    print("".join(table), end="", flush=True)
    sys.exit(run.returncode)


if __name__ == "__main__":
    main()
