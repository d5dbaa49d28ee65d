"""``python -m sim`` (sim/commands.py). ``python -m sim replay SEED ...`` first re-executes
under the seed's hash seed, before the simulator's code is imported: once, not twice."""

from __future__ import annotations

import os
import sys

from .hash_seeds import hashseed_for, run_under


def _main() -> int:
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "replay" and argv[1].isdigit():
        run_under(hashseed_for(int(argv[1])))
    from .commands import main

    return main()


if __name__ == "__main__":
    code = _main()
    sys.stdout.flush()
    os._exit(code)  # no finalizer runs on what crashed nodes left (sim/run.py, BURIED)
