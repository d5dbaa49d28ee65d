"""The ``PYTHONHASHSEED`` a seed runs under, and the re-exec that puts a process under it.

The order of a set of node names follows string hashes, so a seed replays bit for bit only
under the same hash seed (sim/run.py). Kept apart from the simulator's code so that
``python -m sim replay SEED`` can re-execute itself before importing any of it.
"""

from __future__ import annotations

import os
import sys

HASHSEEDS = 4


def hashseed_for(seed: int) -> int:
    return seed % HASHSEEDS


def env_under(hashseed: int) -> dict:
    return {**os.environ, "PYTHONHASHSEED": str(hashseed)}


def run_under(hashseed: int) -> None:
    """Go on in this process if it runs under ``hashseed``; else re-execute ``python -m sim``
    with the same arguments under it."""
    if os.environ.get("PYTHONHASHSEED") != str(hashseed):
        os.execve(sys.executable, [sys.executable, "-m", "sim", *sys.argv[1:]], env_under(hashseed))
