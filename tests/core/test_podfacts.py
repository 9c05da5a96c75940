"""The pod facts a reservation row keeps (app/core/podfacts.py): priority, start time, terminating, gang."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.holds import Asker
from app.core.podfacts import PodFacts, asker_of, facts_of

CREATED, STARTED = "2026-01-01T00:00:00Z", "2026-01-01T00:00:07Z"


def _pod(
    *,
    priority: Any = None,
    started: str | None = None,
    deleting: bool = False,
    group: Any = None,
    namespace: str = "team",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": namespace, "uid": "u", "creationTimestamp": CREATED}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    spec: dict[str, Any] = {"containers": []}
    if priority is not None:
        spec["priority"] = priority
    if group is not None:
        spec["schedulingGroup"] = group
    status = {"startTime": started} if started else {}
    return {"metadata": metadata, "spec": spec, "status": status}


FACTS = [
    pytest.param(_pod(), PodFacts(0, CREATED), id="nothing set: priority 0, created"),
    pytest.param(_pod(priority=1000, started=STARTED), PodFacts(1000, STARTED), id="priority and start time"),
    pytest.param(_pod(priority=-5), PodFacts(-5, CREATED), id="a negative priority"),
    pytest.param(_pod(priority="high"), PodFacts(0, CREATED), id="a priority that is no integer: 0"),
    pytest.param(_pod(priority=True), PodFacts(0, CREATED), id="a boolean is no priority"),
    pytest.param(_pod(deleting=True), PodFacts(0, CREATED, True), id="being deleted: terminating"),
    pytest.param(_pod(group={"podGroupName": "train"}), PodFacts(0, CREATED, gang="team/train"), id="a gang"),
    pytest.param(_pod(group={"podGroupName": ""}), PodFacts(0, CREATED), id="an empty group name: no gang"),
    pytest.param(_pod(group="train"), PodFacts(0, CREATED), id="a malformed group: no gang"),
]


@pytest.mark.parametrize(("pod", "expected"), FACTS)
def test_facts_of(pod: dict[str, Any], expected: PodFacts) -> None:
    assert facts_of(pod) == expected


def test_asker_of() -> None:
    pod = _pod(priority=7, group={"podGroupName": "train"})
    assert asker_of(pod) == Asker("u", 7, "team/train")
