"""A background loop: call `tick()` every `every` seconds on a daemon thread until stopped.

Why: the harness's watchers and stand-in controllers (the chaos storm's ledger watch and observer, the
PodDisruptionBudget controller, the replicas' kubelet on the real control plane) each ran the same event,
daemon thread and start/stop-and-join lines around one function; this is those lines once. The first tick
comes `every` seconds after `start`, never at once; `stop` returns once the running tick ends (or after
`timeout` seconds). `tick` handles its own errors: one that escapes ends the loop, as it ended each
hand-written loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Ticker:
    def __init__(self, name: str, every: float, tick: Callable[[], None]) -> None:
        self.every = every
        self._tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._tick()
