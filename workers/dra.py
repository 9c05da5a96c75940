"""The registration worker's DRA check: list DeviceClasses and ResourceSlices, compare, share, export.

Run after every registration pass (every HAMI_REGISTRATION_INTERVAL, 15 s by default, and after node
changes), on every replica like the inventory snapshot, since each replica's HTTP side decides on its own
copy. Read-only: two paged lists of resource.k8s.io/v1, never a watch or a write to the API. The facts
(`app.core.dra`) go to the ledger's status row `dra` (app/state/drafacts.py) for /filter, the webhook and
/debug/state, and to the gauges `hami_worker_dra_*` behind the alert HamiSchedulerDraCollision.

A cluster without resource.k8s.io/v1 (404) has no DRA: logged once, no error. Any other failure (RBAC,
the API server away) keeps the last facts, is logged once per distinct message and retried next pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence

from app.core import dra
from app.core.dra import DraFacts
from app.core.vendor import Vendor
from app.devices.dra import drivers_for
from app.k8s.client import Kube
from app.k8s.dra import list_dra
from app.k8s.errors import ApiError
from app.state import drafacts
from app.state.ledger import Ledger
from app.state.snapshot import Snapshot
from workers.metrics import WorkerMetrics

logger = logging.getLogger(__name__)


def registered_nodes(snapshot: Snapshot | None) -> set[str]:
    """The nodes we register: usable ones and those left out with a reason (unhealthy, corrupt)."""
    if snapshot is None:
        return set()
    return set(snapshot.nodes) | set(snapshot.broken)


class DraCheck:
    def __init__(
        self,
        kube: Kube,
        vendors: Sequence[Vendor],
        ledger: Ledger,
        metrics: WorkerMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._kube = kube
        self._vendors = tuple(vendors)
        self._drivers = drivers_for({v.key for v in vendors})
        self._ledger = ledger
        self._metrics = metrics
        self._clock = clock
        self._last_error = ""
        self._exported: set[tuple[str, str]] = set()
        self.last: DraFacts | None = None

    def run(self, registered: Collection[str]) -> DraFacts | None:
        """One check; the facts published, or None when the lists failed (the last facts stay)."""
        try:
            lists = list_dra(self._kube)
        except ApiError as exc:
            if exc.message != self._last_error:
                logger.warning(
                    "DRA objects not readable; keeping the last facts", extra={"error": exc.message}
                )
                self._last_error = exc.message
            return None
        self._last_error = ""
        classes, slices = lists if lists is not None else (None, None)
        facts = dra.facts(classes, slices, self._vendors, self._drivers, registered, self._clock())
        self._log_change(facts)
        drafacts.publish(self._ledger, facts)
        self._export(facts)
        self.last = facts
        return facts

    def _log_change(self, facts: DraFacts) -> None:
        last = self.last
        if last is not None and (last.available, last.collisions, last.overlaps) == (
            facts.available,
            facts.collisions,
            facts.overlaps,
        ):
            return
        if not facts.available:
            logger.info("the cluster serves no resource.k8s.io/v1: no DRA to coexist with")
        elif facts.any:
            logger.warning(
                "DRA serves what we manage: pods asking for these names and these nodes are refused",
                extra={
                    "resources": [f"{c.resource} ({', '.join(c.classes)})" for c in facts.collisions],
                    "nodes": [o.node for o in facts.overlaps],
                },
            )
        elif last is not None and last.any:
            logger.info("DRA no longer serves any resource name or node we manage")

    def _export(self, facts: DraFacts) -> None:
        m = self._metrics
        m.dra_available.set(1 if facts.available else 0)
        current = {(c.resource, c.vendor): len(c.classes) for c in facts.collisions}
        for labels, classes in current.items():
            m.dra_collisions.labels(*labels).set(classes)
        for labels in self._exported - current.keys():
            m.dra_collisions.remove(*labels)
        self._exported = set(current)
        m.dra_overlapping_nodes.set(len(facts.overlaps))
