"""The registration worker's sweep of held reservations (docs/held-reservations.md rule 6): every hold
that expired, or whose owner is gone, ends — in the ledger, in one transaction that counts the ending and
records the capacity it frees (app/state/holdstore.py), which the leader then tells kube-scheduler about
(workers/freedtouch.py).

Who is gone is judged on the worker's pod informer (no API call), per kind:

- a nomination: its preemptor absent from the informer (deleted) once the hold is older than
  `GONE_GRACE` (a pod created a moment ago may not have reached the informer yet), terminal (Succeeded or
  Failed), or bound (anywhere: bound on the nominated node, its own assume consumes the hold; a binding
  this replica did not make leaves it to the sweep);
- a gang plan: `gang_gone` (the gang planner's rule: its PodGroup deleted, its quorum changed or bound, a
  member deleted), by default never — gang plans live seconds and expire.

Runs on every replica (each has its own ledger); a follower's freed records are dropped by its touch step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from app.core import pods
from app.core.holds import GANG, KINDS, NOMINATION, Hold
from app.state.ledger import Ledger
from workers.metrics import WorkerMetrics
from workers.reconcile import GONE_GRACE, is_bound

logger = logging.getLogger(__name__)

Lookup = Callable[[str], Mapping[str, Any] | None]  # the informer's pod by UID
GangRule = Callable[[Hold], str]  # why a gang plan's owner is gone ("" while it is there)


def never(_hold: Hold) -> str:
    return ""


def preemptor_gone(hold: Hold, lookup: Lookup, now: float) -> str:
    """Why the nomination's preemptor no longer needs it ("" while it does)."""
    pod = lookup(hold.owner)
    who = f"preemptor {hold.namespace}/{hold.name}"
    if pod is None:
        return f"{who} deleted" if now - hold.created_at > GONE_GRACE else ""
    if pods.is_terminated(pod):
        return f"{who} {pods.phase(pod)}"
    if is_bound(pod):
        return f"{who} bound to {pods.spec(pod).get('nodeName')}"
    return ""


class HoldSweep:
    def __init__(
        self,
        ledger: Ledger,
        lookup: Lookup,
        clock: Callable[[], float],
        metrics: WorkerMetrics,
        gang_gone: GangRule = never,
    ) -> None:
        self._ledger, self._lookup, self._clock = ledger, lookup, clock
        self._metrics, self._gang_gone = metrics, gang_gone

    def _gone(self, hold: Hold) -> str:
        if hold.kind == NOMINATION:
            return preemptor_gone(hold, self._lookup, self._clock())
        return self._gang_gone(hold) if hold.kind == GANG else ""

    def run(self) -> list[Hold]:
        """End the expired holds and those whose owner is gone; set the live holds gauge. Returns the slots
        ended."""
        now = self._clock()
        holds = self._ledger.all_holds()[1]  # a read: the write lock only when something ends
        ended = []
        if any(not hold.live(now) or self._gone(hold) for hold in holds):
            ended = self._ledger.sweep_holds(now, self._gone)
            for key in sorted({slot.key for slot in ended}):
                logger.info("held reservation ended", extra={"hold": key})
            holds = self._ledger.all_holds()[1]
        for kind in KINDS:
            self._metrics.holds.labels(kind).set(
                len({h.key for h in holds if h.kind == kind and h.live(now)})
            )
        return ended
