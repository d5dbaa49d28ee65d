"""The simulator runs in its own processes (``python -m sim``): each seed needs its own
``PYTHONHASHSEED`` and patches every clock, which must not touch pytest's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sim(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sim", *args],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def replay(seed: int, *args: str) -> dict:
    """One seed in a fresh process: its result (sim/run.py ``Result``) as a dict."""
    done = sim("replay", str(seed), "--json", "--tail", "30", *args)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])
