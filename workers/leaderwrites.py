"""The writes the registration worker makes to the API as the leader of a term (workers/worker.py calls them):
HAMi's handshake annotations on nodes, HAMi's role labels on our pods (workers/roles.py) and the release of
abandoned node locks (workers/locksweep.py). Only the leader writes them (ARCHITECTURE.md invariant 4).

Invariant owned here: every write first asks `leading` — is the term it was called for still ours — so a
replica that loses leadership stops writing at once (leader election is not fencing: only the writes
already sent can still land). A refused handshake is counted and logged, not retried here (a node gone
meanwhile quietly): the next registration pass calls for it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from app.core.vendor import LockSpec
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from config.settings import Settings
from workers import roles
from workers.locksweep import sweep_locks
from workers.metrics import WorkerMetrics
from workers.registration import Stamp

logger = logging.getLogger(__name__)

STAMP_CONCURRENCY = 8  # handshakes written at once: a first start stamps every GPU node


class LeaderWrites:
    def __init__(
        self,
        kube: Kube,
        settings: Settings,
        locks: Sequence[LockSpec],
        metrics: WorkerMetrics,
        alive: Callable[[], None],
    ) -> None:
        self._kube = kube
        self._settings = settings
        self._locks = locks
        self._metrics = metrics
        self._alive = alive  # the registrar heartbeat: a long fan-out of writes is not a hung worker

    def nodes_and_roles(self, stamps: Sequence[Stamp], leading: Callable[[], bool]) -> None:
        """The handshakes a registration pass called for (a few at a time), then HAMi's role labels."""
        if stamps:
            with ThreadPoolExecutor(max_workers=STAMP_CONCURRENCY, thread_name_prefix="stamp") as pool:
                list(pool.map(lambda stamp: self._stamp(stamp, leading), stamps))
        s = self._settings
        if s.scheduler_role_label and s.pod_name and s.pod_namespace:
            roles.label_roles(self._kube, s.pod_namespace, s.pod_name, leading)

    def _stamp(self, stamp: Stamp, leading: Callable[[], bool]) -> None:
        if not leading():
            return
        self._alive()
        try:
            objects.patch_node_annotations(self._kube, stamp.node, {stamp.annotation: stamp.value})
            self._metrics.handshakes.labels("ok").inc()
        except ApiError as exc:
            self._metrics.handshakes.labels("error").inc()
            if not exc.not_found:
                logger.warning("handshake patch failed", extra={"node": stamp.node, "error": exc.message})

    def release_abandoned_locks(
        self, nodes: Iterable[Mapping[str, Any]], moment: datetime, leading: Callable[[], bool]
    ) -> None:
        """One sweep of the node locks the informer shows (workers/locksweep.py), counted."""
        released = sweep_locks(
            self._kube, nodes, moment, self._settings.nodelock_expire, leading, self._locks
        )
        self._metrics.lock_sweeps.inc()
        if released:
            self._metrics.locks_released.inc(len(released))
