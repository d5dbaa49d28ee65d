"""Replicas compared byte for byte: every file under one folder equals its twin under the other."""

from __future__ import annotations

import os


def assert_same_files(a, b) -> None:
    a, b = str(a), str(b)
    for d, _, names in os.walk(a):
        for n in names:
            pa = os.path.join(d, n)
            with open(pa, "rb") as fa, open(os.path.join(b, os.path.relpath(pa, a)), "rb") as fb:
                assert fa.read() == fb.read(), n
