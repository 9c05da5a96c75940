"""The work loop's timers (workers/worker.py)."""

from __future__ import annotations


def never() -> bool:
    """A `leading` that never leads: a follower writes nothing."""
    return False


class Timer:
    """Fires once every `every` seconds (monotonic), the first time after `first` (default: `every`)."""

    def __init__(self, every: float, now: float, *, first: float | None = None) -> None:
        self.every = every
        self.due = now + (every if first is None else first)

    def fire(self, now: float) -> bool:
        if now < self.due:
            return False
        self.due = now + self.every
        return True
