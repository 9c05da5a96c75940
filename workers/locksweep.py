"""The leader's sweep of abandoned node locks: no node stays locked for a pod that is not coming back.

A bind takes HAMi's node lock and the device plugin releases it after Allocate; a bind that fails releases
its own. A process killed in between leaves the lock behind. Binds take such a lock over lazily (the rules
of `app.core.nodelock`), but a node that no later bind reaches would stay locked, and operators see a
locked node with nobody working on it (HAMi #2214, #2305). So the leader, every
`HAMI_LOCK_SWEEP_INTERVAL` (30 s), looks at the locks its node informer shows — HAMi's shared
`hami.io/mutex.lock` and every enabled vendor's own (Cambricon's `cambricon.com/dsmlu.lock`, with its own
expiry; `app.core.vendor.node_locks`) — and releases the ones any other pod would take over now
(`nodelock.abandoned`: holder deleted, terminal, moved or never bound for a minute; expired and not
waiting for its allocation; unparsable). The informer only says where to look: each
release re-reads the node and the holder from the API and is conditional on the node's resourceVersion
(`app.k8s.nodelock.release_abandoned_lock`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from app.core import nodelock
from app.core.inventory import node_name
from app.core.nodelock import Verdict
from app.core.vendor import SHARED_LOCK, LockSpec
from app.k8s import objects
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.nodelock import release_abandoned_lock

logger = logging.getLogger(__name__)


def sweep_locks(
    kube: Kube,
    nodes: Iterable[Mapping[str, Any]],
    now: datetime,
    expire: timedelta,
    still_leading: Callable[[], bool],
    specs: Sequence[LockSpec] = (SHARED_LOCK,),
) -> list[tuple[str, str]]:
    """Release the abandoned locks among `nodes`, of every lock in `specs` (`expire` where a spec has no
    expiry of its own); returns (node, why) for each lock released."""
    released: list[tuple[str, str]] = []
    for node in nodes:
        annotations = objects.annotations_of(node)
        for spec in specs:
            value, timeout = annotations.get(spec.annotation), spec.expire or expire
            if value is None or nodelock.abandoned(value, now, timeout).verdict is Verdict.CONTENDED:
                continue
            if not still_leading():
                return released
            name, details = node_name(node), {"node": node_name(node), "lock": spec.annotation}
            try:
                why = release_abandoned_lock(kube, name, now, timeout, spec.annotation)
            except ApiError as exc:
                logger.warning("could not sweep a node lock", extra={**details, "error": exc.message})
                continue
            if why:
                logger.warning(
                    "released an abandoned node lock", extra={**details, "value": value, "why": why}
                )
                released.append((name, why))
    return released
