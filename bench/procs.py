"""What the benchmark reads about processes from /proc: children, resident memory, CPU time; and the machine.

CPU time is `utime + stime` of `/proc/<pid>/stat` (clock ticks), read at the start and the end of the
measured window, so each process's share of the 2 cores is visible — the API emulator's separately from
ours. Resident memory is `VmRSS` (now) and `VmHWM` (peak) of `/proc/<pid>/status`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Direct children of `pid` (Gunicorn's workers of its master)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                found.extend(int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return sorted(found)


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid` in seconds (None when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of `pid` in MB ({} when it is gone)."""
    values: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = round(int(rest.split()[0]) / 1024, 1)
    return values


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (`/proc/stat`: everything but idle and iowait)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0.0
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS


def cpu_sample(groups: Mapping[str, Iterable[int]]) -> dict[str, float]:
    """CPU seconds per named group of PIDs (gone PIDs count 0), this process as `bench`, and the whole
    machine as `machine` (so load from processes outside the benchmark shows)."""
    sample = {name: sum(cpu_seconds(pid) or 0.0 for pid in pids) for name, pids in groups.items()}
    times = os.times()
    sample["bench"] = times.user + times.system
    sample["machine"] = machine_busy_seconds()
    return sample


def cpu_window(before: Mapping[str, float], after: Mapping[str, float], seconds: float) -> dict[str, Any]:
    """CPU seconds per group over a window, and the share of one core (100 % = one core busy)."""
    used = {name: round(after.get(name, 0.0) - before.get(name, 0.0), 2) for name in after}
    ours = sum(v for k, v in used.items() if k in ("service", "worker"))
    used["other_processes"] = round(used.pop("machine", 0.0) - sum(used.values()), 2)
    return {
        "window_s": round(seconds, 2),
        "cpu_s": used,
        "core_pct": {k: round(100 * v / seconds, 1) if seconds > 0 else 0.0 for k, v in used.items()},
        "ours_cpu_s": round(ours, 2),
        "emulator_cpu_s": used.get("apiserver", 0.0),
    }


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (a shell's command and what it started)."""
    found, queue = [], children(pid)
    while queue:
        child = queue.pop()
        found.append(child)
        queue.extend(children(child))
    return sorted(found)
