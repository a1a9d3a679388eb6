"""A process and its descendants, from Linux /proc: what a bench measures a server by (CPU, memory)."""

from __future__ import annotations

import os
from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    # after the command name, which may hold spaces and parentheses
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """The live descendants of ``pid`` (children of any of its threads: found by parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat_fields(int(entry.name))[1]), []).append(int(entry.name))
            except OSError:
                continue
    found, pending = [], list(children.get(pid, []))
    while pending:
        child = pending.pop()
        found.append(child)
        pending.extend(children.get(child, []))
    return found


def cpu_s(pid: int) -> float:
    """User + system CPU seconds ``pid`` and its live descendants have used so far."""
    ticks = 0
    for current in [pid, *descendants(pid)]:
        try:
            fields = _stat_fields(current)
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its live descendants, in MB."""
    total_kb = 0
    for current in [pid, *descendants(pid)]:
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total_kb / 1024
