"""Process facts read from /proc: resident and peak memory, CPU time, bytes written to storage."""

from __future__ import annotations

import os

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, all its threads, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def written_bytes(pid: int) -> int:
    """Bytes a process caused to be written to storage (``write_bytes`` of /proc/<pid>/io:
    its file pages as they are written back or synced; not the file system's own journal)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == "write_bytes":
                return int(value)
    raise ValueError(f"no write_bytes in /proc/{pid}/io")
