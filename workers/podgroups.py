"""PodGroups and the pods naming one, from the API into the ledger file for /filter (app/state/podgroups.py).

Why it exists: a gang member's /filter plans for the whole quorum (app/filter/gang.py) and must not call the
API on kube-scheduler's serial path. This keeps what it needs where it reads it:

- whether the API server serves `scheduling.k8s.io/v1beta1` podgroups at all (app/k8s/workload.py). Not
  served — Kubernetes before 1.37, or the `GenericWorkload` gate off — is no error: nothing is listed or
  watched and the question is asked again every `REDISCOVER` seconds (an API server upgraded or
  reconfigured meanwhile). A 403 (the chart's RBAC for podgroups missing) is logged once per discovery.
- every PodGroup (an informer: paged list, then watch), as `PodGroupFacts` rows;
- every pod of a counted scheduler name that names a PodGroup (fed by the worker's pod watch, so no
  second pod list): its node when bound and the pod as the informer keeps it. A deleted or terminal
  member leaves the table.

Only rows that changed are written (a member's status updates do not touch the ledger). The tables are
cleared when the worker starts, before its informers list again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.core import pods
from app.core.gang import group_of, podgroup_facts
from app.core.holds import Hold
from app.core.pods import PodError
from app.k8s.client import Kube
from app.k8s.errors import ApiError
from app.k8s.watching import Target
from app.k8s.workload import podgroups_served
from app.state.ledger import Ledger
from app.state.podgroups import Gang, MemberFacts, PodGroups
from workers.informers import DELETED, Change, Informer, by_name
from workers.reconcile import GONE_GRACE

logger = logging.getLogger(__name__)

REDISCOVER = 300.0  # seconds between two questions "does the API server serve PodGroups?" while it does not
_KEPT_SPEC = ("schedulingPolicy", "priority", "priorityClassName", "disruptionMode", "schedulingConstraints")


def podgroup_shape(group: Mapping[str, Any]) -> dict[str, Any]:
    """What the informer keeps of a PodGroup: its identity and the spec fields a plan reads."""
    metadata = group.get("metadata")
    spec = group.get("spec")
    meta = metadata if isinstance(metadata, Mapping) else {}
    kept = spec if isinstance(spec, Mapping) else {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta},
        "spec": {k: kept[k] for k in _KEPT_SPEC if k in kept},
    }


def member_facts(pod: Mapping[str, Any]) -> MemberFacts | None:
    """The member row of a pod naming a PodGroup; None for a pod naming none, terminal, or malformed."""
    group = group_of(pod)
    if not group:
        return None
    try:
        if pods.is_terminated(pod):
            return None
        node = pods.spec(pod).get("nodeName")
        return MemberFacts(
            pods.uid(pod),
            pods.namespace(pod),
            group,
            pods.name(pod),
            node if isinstance(node, str) else "",
            {key: pod[key] for key in ("metadata", "spec") if key in pod},
        )
    except PodError:
        return None


def _same(a: MemberFacts, b: MemberFacts) -> bool:
    """Equal in what a plan reads (the pod's resourceVersion aside)."""
    strip = {k: v for k, v in a.pod.get("metadata", {}).items() if k != "resourceVersion"}
    other = {k: v for k, v in b.pod.get("metadata", {}).items() if k != "resourceVersion"}
    return (a.podgroup, a.node, a.name, strip, a.pod.get("spec")) == (
        b.podgroup,
        b.node,
        b.name,
        other,
        b.pod.get("spec"),
    )


class GangWatch:
    """The PodGroup informer (once the API serves PodGroups) and the member rows; one per worker."""

    def __init__(
        self,
        kube: Kube,
        ledger: Ledger,
        on_restart: Callable[[str, str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kube, self._clock = kube, clock
        self._on_restart = on_restart
        self.store = PodGroups(ledger)
        self.informer: Informer | None = None
        self._members: dict[str, MemberFacts] = {}
        self._due = 0.0
        self.store.clear()

    def discover(self, now: float) -> bool:
        """Start watching PodGroups if the API server serves them (asked at most every REDISCOVER seconds
        until it does); True once watching."""
        if self.informer is not None:
            return True
        if now < self._due:
            return False
        self._due = now + REDISCOVER
        try:
            served = podgroups_served(self._kube)
        except ApiError as exc:
            logger.warning(
                "cannot tell whether the API server serves PodGroups; gangs are planned as single pods",
                extra={"status": exc.status, "error": exc.message},
            )
            return False
        self.store.set_served(served)
        if not served:
            logger.info("the API server serves no PodGroups (scheduling.k8s.io/v1beta1): no gangs")
            return False
        self.informer = Informer(
            self._kube,
            Target("podgroups"),
            podgroup_shape,
            by_name,
            self._on_groups,
            on_restart=self._on_restart,
        )
        self.informer.start()
        logger.info("watching PodGroups (scheduling.k8s.io/v1beta1)")
        return True

    def gang_gone(self, hold: Hold) -> str:
        """Why a slot's gang plan no longer stands (`plan_gone`), for the hold sweep (workers/holdsweep.py);
        "" until the PodGroup informer has listed (an empty table would read as every PodGroup deleted)."""
        informer = self.informer
        if informer is None or not informer.synced.is_set():
            return ""
        namespace, _, name = hold.owner.partition("/")
        return plan_gone(hold, self.store.gang(namespace, name), self._clock())

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop()

    def join(self, timeout: float) -> None:
        if self.informer is not None:
            self.informer.join(timeout)

    # -- handlers (informer threads) ------------------------------------------------------------------------

    def _on_groups(self, changes: Sequence[Change]) -> None:
        gone, current = [], []
        for change in changes:
            facts = podgroup_facts(change.obj)
            if facts is None:
                continue
            if change.type == DELETED:
                gone.append((facts.namespace, facts.name))
            else:
                current.append(facts)
        if gone:
            self.store.drop_groups(gone)
        if current:
            self.store.put_groups(current)

    def on_pods(self, changes: Sequence[Change]) -> None:
        """The pod watch's changes (every counted pod): keep the rows of the pods that name a PodGroup."""
        gone: list[str] = []
        current: dict[str, MemberFacts] = {}
        for change in changes:
            metadata = change.obj.get("metadata")
            uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
            if not isinstance(uid, str) or not uid:
                continue
            facts = None if change.type == DELETED else member_facts(change.obj)
            known = current.get(uid) or self._members.get(uid)
            if facts is None:
                if known is not None:
                    gone.append(uid)
                    current.pop(uid, None)
            elif known is None or not _same(known, facts):
                current[uid] = facts
        # written first, remembered after: a failed write makes the informer list again (delivered again)
        if gone:
            self.store.drop_members(gone)
        if current:
            self.store.put_members(current.values())
            progressed = {
                (m.namespace, m.podgroup)
                for uid, m in current.items()
                if m.bound and not (uid in self._members and self._members[uid].bound)
            }
            if progressed:  # a member bound: the gang's attempts start afresh (app/core/gang.py)
                self.store.forget_attempts(progressed)
        for uid in gone:
            self._members.pop(uid, None)
        self._members.update(current)


def plan_gone(hold: Hold, gang: Gang | None, now: float) -> str:
    """Why a slot of a gang plan no longer stands (docs/held-reservations.md rule 6), "" while it does: its
    PodGroup deleted, its member deleted (once the slot is older than GONE_GRACE: a member filtered
    before the informer saw it) or bound (its slot was not consumed), or the quorum bound."""
    if gang is None:
        return f"PodGroup {hold.owner} deleted"
    member = next((m for m in gang.members if m.uid == hold.slot), None)
    if member is None:
        return f"a planned member of {hold.owner} deleted" if now - hold.created_at > GONE_GRACE else ""
    if member.bound:
        return f"a planned member of {hold.owner} bound"
    if gang.bound >= gang.group.min_count:
        return f"the quorum of {hold.owner} bound"
    return ""
