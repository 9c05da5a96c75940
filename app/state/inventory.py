"""A Gunicorn worker's decoded copy of the inventory snapshot, reloaded only when a new one is published.

Checking costs one `stat` of the snapshot file; a reload reuses the decoded records of nodes whose revision
did not change. Readers get an immutable `Snapshot` and keep it for the whole request, so a reload in another
thread never changes what a decision sees halfway.

A decoded snapshot is a few hundred thousand long-lived objects. Left in the cyclic garbage collector's
generations, every full collection traverses them: a 230 ms pause in the middle of some request at 5,000
nodes (measured). After a reload they are moved to the permanent generation (`gc.freeze`); they are still
freed by reference counting when the next snapshot replaces them (they hold no reference cycles).
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from app.state import snapshot
from app.state.snapshot import Snapshot, SnapshotError


class InventoryCache:
    def __init__(self, state_dir: Path) -> None:
        self._dir = state_dir
        self._file = str(state_dir / snapshot.SNAPSHOT_FILE)
        self._stamp: tuple[int, int] | None = None
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()
        self.reloads = 0

    def current(self) -> Snapshot | None:
        """The latest published snapshot, or None before the registration worker published one."""
        stamp = snapshot.file_stamp(self._file)
        if stamp == self._stamp:
            return self._snapshot
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._snapshot = snapshot.read(self._dir, self._snapshot)
                except SnapshotError:
                    return self._snapshot
                self._stamp = stamp
                self.reloads += 1
                gc.freeze()  # see the module docstring
            return self._snapshot
