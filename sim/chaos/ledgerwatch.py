"""The chaos storm's mid-run check of the leader's ledger: a `bound` row must not vanish while its pod still
holds the devices (issue 11, finding 1).

Why it exists: the verdict's ledger check runs once, after the storm, when every watch has caught up; a
ledger that dropped live reservations during a lagging watch and got them back afterwards passes it, and
the bind re-check after the node lock may absorb the double allocation such a drop invites, so the
oversubscription sampler sees nothing either. Finding 1 was exactly that: the worker's sweep deleted rows
whose pods its lagging informer did not know, `bound` ones included.

Every `every` seconds `LedgerWatch` reads the ledger of the one Ready replica (the leader: the only one
deciding), then lists the storm's pods through the emulator's fault-free hooks — in that order, so a pod
that ended or was deleted after the read shows it. A row that was `bound` in the previous sample of the
same replica and is gone now, while its pod (same UID) is still bound to the row's node, not terminating,
not finished, and still carries `hami.io/vgpu-node` for that node, was dropped: nothing legitimate removes
a reservation the device plugin is serving (workers/reconcile.py rules 2 and 3). Samples across a change
of leader, or with no or two Ready replicas, are not compared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from app.state.ledger import BOUND, Ledger
from sim.kit import podutil
from sim.kit.ticker import Ticker

logger = logging.getLogger(__name__)

ASSIGNED = "hami.io/vgpu-node"
Rows = Mapping[str, tuple[str, str]]  # uid -> (state, node)


class Replica(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def state_dir(self) -> Path: ...


class Replicas(Protocol):
    """What the watch needs of sim.cluster.replicas.Replicas."""

    def ready_ones(self) -> Sequence[Replica]: ...


def holds(pod: Mapping[str, Any] | None, node: str) -> bool:
    """Whether `pod` still holds devices on `node` as the API shows it."""
    if pod is None or podutil.node_name(pod) != node or podutil.terminating(pod):
        return False
    if podutil.phase(pod) in podutil.TERMINAL:
        return False
    return podutil.annotations_of(pod).get(ASSIGNED) == node


def dropped(before: Rows, after: Rows, pods_by_uid: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The uids whose `bound` row of `before` is missing from `after` while their pod still holds it."""
    return sorted(
        uid
        for uid, (state, node) in before.items()
        if state == BOUND and uid not in after and holds(pods_by_uid.get(uid), node)
    )


def read_rows(ledger: Ledger) -> dict[str, tuple[str, str]]:
    return {entry.uid: (entry.state, entry.node) for entry in ledger.all_entries()}


class LedgerWatch:
    """Samples the leader's ledger against the API while the storm runs (module docstring)."""

    def __init__(
        self,
        replicas: Replicas,
        list_pods: Callable[[], list[dict[str, Any]]],
        *,
        every: float = 2.0,
    ) -> None:
        self.replicas = replicas
        self.list_pods = list_pods
        self.samples = 0  # samples compared with the previous one of the same leader
        self.drops: list[dict[str, Any]] = []
        self._previous: tuple[str, Rows] | None = None
        self._ticker = Ticker("chaos-ledger-watch", every, self._tick)

    def start(self) -> LedgerWatch:
        self._ticker.start()
        return self

    def stop(self) -> None:
        self._ticker.stop(30)

    def sample(self) -> None:
        ready = self.replicas.ready_ones()
        if len(ready) != 1:
            self._previous = None
            return
        leader = ready[0]
        ledger = Ledger(leader.state_dir)
        try:
            rows = read_rows(ledger)
        finally:
            ledger.close()
        pods = {podutil.uid(p): p for p in self.list_pods()}
        previous, self._previous = self._previous, (leader.name, rows)
        if previous is None or previous[0] != leader.name:
            return
        self.samples += 1
        for uid in dropped(previous[1], rows, pods):
            pod = pods[uid]
            self.drops.append({"pod": podutil.key(pod), "uid": uid, "node": podutil.node_name(pod)})
            logger.warning("the leader's ledger dropped a live reservation: %s", self.drops[-1])

    def _tick(self) -> None:
        try:
            self.sample()
        except Exception as exc:  # a missed sample (the API server restarting, say), not a failed run
            logger.warning("ledger sample failed: %s", exc)
            self._previous = None

    def summary(self) -> dict[str, Any]:
        return {
            "ledger_samples": self.samples,
            "ledger_dropped_rows": len(self.drops),
            "ledger_dropped_first": self.drops[:10],
        }
