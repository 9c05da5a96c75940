"""Freed capacity is heard (docs/held-reservations.md, issues 29 and 30): the leader tells kube-scheduler that
devices came back on a node without an API event it would see, so the pods our filter refused are tried
again within seconds rather than at its five-minute flush.

kube-scheduler re-queues a pod an extender refused on any cluster event: read in its source for 1.34.4,
1.37.2 and 1.38.0-beta.0, a profile with extenders registers a default enqueue extension for the fake plugin
`Extender` (pkg/scheduler/framework/runtime/framework.go: every resource, every action, hint `Queue`), and
a pod whose only rejection came from an extender carries `Extender` among its unschedulable plugins
(schedule_one.go). A node update counts as the changes `NodeSchedulingPropertiesChange` extracts
(framework/events.go), an annotation change (`UpdateNodeAnnotation`) among them. So the touch is a merge
patch of the scheduler-owned node annotation `FREED_ANNOTATION` (the time in milliseconds: every touch a
new value; docs/compatibility.md): nothing selects on it, and the worker's own node shape leaves it out (no
registration pass). kube-scheduler's log at -v=6 names it: `event="NodeUpdateNodeAnnotation"`;
tests/real/test_real_freed.py shows a refused pod binding within seconds of the capacity's release, and
the same pod left waiting when the release is not followed by a touch.

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

FREED_ANNOTATION = "hami.io/capacity-freed"  # scheduler-owned: milliseconds since the epoch of the last touch
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
                stamp = str(int(self._clock() * 1000))
                objects.patch_node_annotations(self._kube, node, {FREED_ANNOTATION: stamp})
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
