"""Freed capacity is heard (docs/held-reservations.md, issues 29 and 30): the leader tells kube-scheduler that
devices came back on a node without an API event it would see, so the pods our filter refused are tried
again within seconds rather than at its five-minute flush.

kube-scheduler re-queues a pod an extender refused (it names no plugin that rejected it) on any cluster
event some enabled plugin registered interest in (`isPodWorthRequeuing` with no rejector plugins:
`queueAfterBackoff`). A node change counts only as the kinds `NodeSchedulingPropertiesChange` extracts, and
only those a plugin registered: read in kube-scheduler's source (pkg/scheduler/eventhandlers.go
`updateNodeInCache`, framework/events.go, the default plugins' `EventsToRegister`) for 1.34.4, 1.37.2 and
1.38.0-beta.0, an annotation change (`UpdateNodeAnnotation`) interests no default plugin and is dropped,
while a label change (`UpdateNodeLabel`: NodeAffinity, InterPodAffinity, PodTopologySpread, VolumeBinding,
VolumeZone) moves every such pod to the active or backoff queue. So the touch sets the scheduler-owned
node label `FREED_LABEL` to the time in milliseconds (docs/compatibility.md); tests/real/test_real_freed.py
shows a refused pod binding within seconds of the capacity's release.

Released without such an event (the releasing process records the node in the ledger's `freed` table,
app/state/holdstore.py): a hold that ended (any way), a phantom reservation the sweep removed, the
reservation of a pending pod removed on its deletion. Invariants owned here:

- only the leader writes, each write re-asking the elector (`leading`); a follower drops what it drains;
- at most one touch per node per `MIN_INTERVAL` (1 s), coalesced: records for a node touched less than
  that ago wait, and become one touch;
- a failed touch is retried at the next step (the node stays pending); a node gone from the API (404) is
  dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.state.ledger import Ledger
from workers.metrics import WorkerMetrics

logger = logging.getLogger(__name__)

FREED_LABEL = "hami.io/capacity-freed"  # scheduler-owned: milliseconds since the epoch of the last touch
MIN_INTERVAL = 1.0  # seconds between two touches of one node


class FreedTouch:
    def __init__(
        self,
        kube: Kube,
        ledger: Ledger,
        clock: Callable[[], float],
        metrics: WorkerMetrics,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube, self._ledger, self._clock, self._metrics = kube, ledger, clock, metrics
        self._monotonic = monotonic
        self._pending: dict[str, str] = {}  # node -> the first cause recorded since its last touch
        self._touched: dict[str, float] = {}  # node -> monotonic time of its last touch

    @property
    def pending(self) -> dict[str, str]:
        return dict(self._pending)

    def step(self, leading: Callable[[], bool]) -> int:
        """Drain the freed records and touch the nodes that may be touched now; returns how many were."""
        for freed in self._ledger.drain_freed():
            self._pending.setdefault(freed.node, freed.cause)
        if not leading():
            self._pending.clear()
            return 0
        now, touched = self._monotonic(), 0
        self._touched = {n: t for n, t in self._touched.items() if now - t < MIN_INTERVAL}
        for node, cause in list(self._pending.items()):
            if node in self._touched:
                continue  # touched less than MIN_INTERVAL ago: coalesced into the next touch
            if not leading():
                return touched
            try:
                objects.patch_node_labels(self._kube, node, {FREED_LABEL: str(int(self._clock() * 1000))})
            except ApiError as exc:
                if exc.not_found:
                    del self._pending[node]
                self._metrics.freed_touches.labels("failed").inc()
                logger.info(
                    "could not touch a node whose capacity came back",
                    extra={"node": node, "error": exc.message},
                )
                continue
            del self._pending[node]
            self._touched[node] = now
            touched += 1
            self._metrics.freed_touches.labels("touched").inc()
            logger.info("told kube-scheduler that capacity came back", extra={"node": node, "cause": cause})
        return touched
