"""The facts about a pod that every reservation row keeps beside its devices, as plain data: what preemption
and gangs read of the pods holding devices, so that /preempt, the preemptor and the gang planner make no
API call per pod (they read the ledger's rows, app/state/rows.py).

- `priority`: `spec.priority` (the admission plugin resolves its PriorityClass into it), 0 when unset —
  kube-scheduler's `corev1helpers.PodPriority`;
- `started`: `status.startTime`, else `metadata.creationTimestamp`, as RFC 3339 text (kube-scheduler ranks
  pods of equal priority by it; the API writes one format, so texts compare as times);
- `terminating`: `metadata.deletionTimestamp` is set (a victim already on its way out);
- `gang`: `<namespace>/<spec.schedulingGroup.podGroupName>`, "" for a pod in no PodGroup (the Workload
  API, docs/gangs.md).

`asker_of` is the pod as /filter's asker (app/core/holds.py): its UID, priority and gang.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core import pods
from app.core.holds import Asker
from app.core.preemption import priority, started


@dataclass(frozen=True, slots=True)
class PodFacts:
    priority: int = 0
    started: str = ""
    terminating: bool = False
    gang: str = ""


def gang_of(pod: Mapping[str, Any]) -> str:
    """`<namespace>/<podGroupName>` of the pod's `spec.schedulingGroup`, "" when it names none."""
    group = pods.spec(pod).get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return f"{pods.namespace(pod)}/{name}" if isinstance(name, str) and name else ""


def facts_of(pod: Mapping[str, Any]) -> PodFacts:
    return PodFacts(
        priority=priority(pod),
        started=started(pod),
        terminating=bool(pods.metadata(pod).get("deletionTimestamp")),
        gang=gang_of(pod),
    )


def asker_of(pod: Mapping[str, Any]) -> Asker:
    return Asker(pods.uid(pod), priority(pod), gang_of(pod))
