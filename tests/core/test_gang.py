"""Gang facts (app/core/gang.py): a PodGroup read from JSON, and the attempts rule that keeps a gang
kube-scheduler keeps abandoning from holding devices."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.gang import (
    ALL,
    BASIC,
    RETRY_FIRST,
    RETRY_MAX,
    Attempts,
    PodGroupFacts,
    abandoned_reason,
    gang_priority,
    group_of,
    next_attempt,
    podgroup_facts,
    shortfall_reason,
)

TTL = 15.0


def _group(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "ml", "uid": "u"}, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            _group(schedulingPolicy={"gang": {"minCount": 8}}, priority=100, disruptionMode={"all": {}}),
            PodGroupFacts("ml", "train", "u", "gang", 8, 100, ALL, ""),
            id="gang",
        ),
        pytest.param(
            _group(schedulingPolicy={"basic": {}}), PodGroupFacts("ml", "train", "u", BASIC, 1), id="basic"
        ),
        pytest.param(
            _group(schedulingPolicy={"gang": {"minCount": "8"}}, priority=True),
            PodGroupFacts("ml", "train", "u", "gang", 1),
            id="malformed-values-read-as-absent",
        ),
        pytest.param(
            _group(
                schedulingPolicy={"gang": {"minCount": 2}}, schedulingConstraints={"topology": [{"key": "k"}]}
            ),
            PodGroupFacts("ml", "train", "u", "gang", 2, topology="k"),
            id="topology",
        ),
        pytest.param({"metadata": {}}, None, id="no-name"),
    ],
)
def test_podgroup_facts(obj: dict[str, Any], expected: PodGroupFacts | None) -> None:
    assert podgroup_facts(obj) == expected


def test_a_pods_group_and_priority() -> None:
    pod = {
        "metadata": {"namespace": "ml"},
        "spec": {"schedulingGroup": {"podGroupName": "train"}, "priority": 5},
    }
    assert group_of(pod) == "train" and group_of({"spec": {}}) == "" and group_of({"spec": "x"}) == ""
    assert gang_priority(PodGroupFacts("ml", "train"), pod) == 5
    assert gang_priority(PodGroupFacts("ml", "train", priority=9), pod) == 9
    sampled = shortfall_reason(PodGroupFacts("ml", "train", min_count=8), 5, True)
    assert sampled == "gang ml/train: devices for 5 of 8 members among the nodes offered"


@pytest.mark.parametrize(
    ("before", "now", "after", "allowed"),
    [
        pytest.param(Attempts(), 100.0, Attempts(100.0), True, id="first-attempt-opens"),
        pytest.param(Attempts(100.0), 110.0, Attempts(100.0), True, id="retry-within-the-ttl"),
        pytest.param(Attempts(100.0), 116.0, Attempts(0.0, 1, 116.0 + RETRY_FIRST), False, id="abandoned"),
        pytest.param(Attempts(0.0, 1, 146.0), 140.0, Attempts(0.0, 1, 146.0), False, id="waiting"),
        pytest.param(Attempts(0.0, 1, 146.0), 146.0, Attempts(146.0, 1, 146.0), True, id="resumed"),
        pytest.param(
            Attempts(146.0, 1, 146.0), 200.0, Attempts(0.0, 2, 200.0 + 2 * RETRY_FIRST), False, id="doubles"
        ),
        pytest.param(Attempts(1.0, 9, 1.0), 100.0, Attempts(0.0, 10, 100.0 + RETRY_MAX), False, id="capped"),
    ],
)
def test_next_attempt(before: Attempts, now: float, after: Attempts, allowed: bool) -> None:
    assert next_attempt(before, now, TTL) == (after, allowed)


def test_the_abandoned_reason() -> None:
    text = abandoned_reason(PodGroupFacts("ml", "train"), Attempts(0.0, 2, 160.0), 100.0)
    assert text.startswith("gang ml/train: kube-scheduler did not bind the quorum placed for it (2 times")
    assert text.endswith("for 60s more")
