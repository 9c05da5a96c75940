"""Everything one Gunicorn worker process uses to serve requests, built once after fork.

The use cases (filtering, binding, admission) receive this context; it owns the process's API client, its
ledger connection, its in-memory usage view and inventory copy, the fast path's derived per-node state, the
event recorder and the clock. Nothing here decides anything.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.core.dra import DraFacts
from app.core.model import NodeDevices
from app.k8s.client import Kube
from app.k8s.events import EventRecorder
from app.state.drafacts import DraReader
from app.state.fastpath import FastPath
from app.state.inventory import InventoryCache
from app.state.ledger import Ledger
from app.state.podentry import PodUses
from app.state.snapshot import Snapshot
from app.state.status import ReplicaStatus
from app.state.usage import UsageView
from config.settings import Settings

if TYPE_CHECKING:  # built by app.factory; the filter verb's writer sits above this context's layer
    from app.filter.write import AllocationWriter


@dataclass
class Context:
    settings: Settings
    kube: Kube
    ledger: Ledger
    inventory: InventoryCache
    usage: UsageView
    events: EventRecorder
    writer: AllocationWriter | None = None  # the deferred allocation writes (HAMI_FILTER_WRITE)
    clock: Callable[[], float] = time.time
    fastpath: FastPath = field(default_factory=FastPath)
    _status: tuple[float, ReplicaStatus] | None = field(default=None, repr=False)
    _dra: DraReader | None = field(default=None, repr=False)
    _pod_uses: PodUses | None = field(default=None, repr=False)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def status(self) -> ReplicaStatus:
        """The replica status rows, re-read at most every 250 ms (one tuple swap: safe across threads)."""
        cached, now = self._status, time.monotonic()
        if cached is None or now - cached[0] > 0.25:
            cached = (now, ReplicaStatus.from_rows(self.ledger.status()))
            self._status = cached
        return cached[1]

    @property
    def pod_uses(self) -> PodUses:
        """/bind's re-check: the device uses of the node's pods, kept per pod version (app/state/podentry)."""
        if self._pod_uses is None:
            self._pod_uses = PodUses(self.settings.vendors, self.settings.counted.names)
        return self._pod_uses

    def dra(self) -> DraFacts:
        """What the registration worker found of DRA serving our names and nodes (app/state/drafacts.py)."""
        if self._dra is None:
            self._dra = DraReader(self.ledger)
        return self._dra.current()

    def warm(self) -> None:
        """Load now what the first filter would otherwise load: the inventory, the usage view and the fast
        path's per-node state (about a second at 5,000 nodes and 20,000 reservations)."""
        snapshot = self.refresh()
        if snapshot is not None:
            self.fastpath.warm(snapshot, self.usage)
        gc.freeze()  # all of it is long-lived: keep it out of full garbage collections (app.state.inventory)

    def node_devices(self, name: str) -> NodeDevices | None:
        """The node's devices as this worker's inventory has them (what the ledger keeps H1 with)."""
        snapshot = self.inventory.current()
        record = snapshot.nodes.get(name) if snapshot is not None else None
        return record.devices if record is not None else None

    def refresh(self) -> Snapshot | None:
        """Bring the usage view up to date with the ledger; return the current inventory."""
        self.usage.refresh(self.ledger)
        return self.inventory.current()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.events.close()
        self.ledger.close()
        self.kube.close()
