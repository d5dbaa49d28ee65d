"""Puts the repository root on ``sys.path``.

Benchmarks run as ``python bench/x.py``, which puts only ``bench/`` there; the harness
they share, ``testkit``, sits at the root and is not installed with horologe.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
