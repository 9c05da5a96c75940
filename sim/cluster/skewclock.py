"""`python -m sim.cluster.skewclock FILE MODULE [ARGS...]`: run `python -m MODULE ARGS...` in this process
with a wall clock that a test can step back and forward while it runs — a node whose clock jumps (an NTP step,
a VM resumed with a stale clock), which the chaos storm's two-leader fault (sim.chaos.twoleaders) needs.

`time.time()` and `time.time_ns()` return the real wall clock minus the seconds written in FILE (a float; a
missing, empty or unreadable file counts as 0). The file is looked at no more often than every 50 ms
(`time.monotonic()`, which is left alone: timeouts and sleeps keep running at the real pace), so a step
takes effect within that. The patch is installed before MODULE is imported, so every `clock=time.time`
default of the product (app/context.py, app/k8s/election.py, workers/worker.py) captures the stepped clock;
forked children (Gunicorn's workers) inherit it. `datetime.now()` reads the C clock and is not stepped: the
product takes its decisions' times from `time.time` (its `clock`), which is what a step must reach.

Used only by the chaos storm, and only when its plan has two-leader faults: the replicas are otherwise
started exactly as the chart starts them.
"""

from __future__ import annotations

import runpy
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

CHECK_EVERY = 0.05  # seconds between two looks at the offset file


class Offset:
    """The seconds the clock is behind, read from `path` when it changed (at most every CHECK_EVERY)."""

    def __init__(self, path: Path, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._seconds = 0.0
        self._next = 0.0
        self._stamp: tuple[int, int] | None = None

    def seconds(self) -> float:
        now = self._monotonic()
        if now < self._next:
            return self._seconds
        with self._lock:
            self._next = now + CHECK_EVERY
            try:
                stat = self.path.stat()
            except OSError:
                self._stamp, self._seconds = None, 0.0
                return 0.0
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._seconds = float(self.path.read_text(encoding="utf-8").strip() or 0.0)
                except (OSError, ValueError):
                    self._seconds = 0.0
            return self._seconds


def install(path: Path) -> Offset:
    """Step this process's `time.time` / `time.time_ns` by the offset in `path` from now on."""
    offset = Offset(path)
    real_time, real_ns = time.time, time.time_ns

    def stepped() -> float:
        return real_time() - offset.seconds()

    def stepped_ns() -> int:
        return real_ns() - int(offset.seconds() * 1_000_000_000)

    vars(time)["time"] = stepped
    vars(time)["time_ns"] = stepped_ns
    return offset


def write_offset(path: Path, seconds: float) -> None:
    """Set the clock of the processes reading `path` `seconds` behind (0: the real clock), atomically."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(f"{seconds:g}\n", encoding="utf-8")
    temporary.replace(path)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: python -m sim.cluster.skewclock FILE MODULE [ARGS...]")
    install(Path(argv[0]))
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
