"""`inspect`'s gang section (app/cli/gangsection.py): from PodGroups and pods, and from a replica's state."""

from __future__ import annotations

from typing import Any

from app.cli import gangsection
from app.cli.gangsection import GangView


def _pod(name: str, group: str, *, node: str = "", reserved: bool = False, why: str = "") -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": "gpu-0"} if reserved else {}
    conditions = [{"type": "PodScheduled", "status": "False", "message": why}] if why else []
    spec: dict[str, Any] = {"schedulingGroup": {"podGroupName": group}}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": name, "annotations": annotations},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": conditions},
    }


GROUP = {
    "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
}
BASIC = {"metadata": {"name": "web", "namespace": "ml"}, "spec": {"schedulingPolicy": {"basic": {}}}}


def test_gangs_from_the_api() -> None:
    refused = "0/1 nodes are available: gang ml/train: devices for 3 of 4 members."
    pod_list = [
        _pod("a", "train", node="gpu-0"),
        _pod("b", "train", reserved=True),
        _pod("c", "train", why=refused),
        _pod("d", "orphan"),
        {"metadata": {"name": "plain", "namespace": "ml"}, "spec": {}},
    ]
    views = gangsection.from_objects([GROUP, BASIC], pod_list)
    assert views == [
        GangView("ml", "orphan", None, 1, 0, 0, 0, "no PodGroup"),
        GangView("ml", "train", 4, 3, 1, 1, 0, refused),
    ]
    text = gangsection.render(views)
    assert text.splitlines()[0] == "GANGS"
    assert "ml/train" in text and refused in text
    assert gangsection.from_objects(None, pod_list)[0].why == ""  # a dump: no PodGroups read, no verdict


def test_gangs_from_a_replica() -> None:
    state = {"gangs": [{"namespace": "ml", "name": "train", "min_count": 4, "members": 5, "bound": 0,
                        "reserved": 2, "held": 2, "why": ""}]}  # fmt: skip
    assert gangsection.from_state(state) == [GangView("ml", "train", 4, 5, 0, 2, 2, "")]
    assert gangsection.from_state({}) is None
    assert gangsection.to_json([GangView("ml", "t", 1, 1, 1, 0, 0, "")])[0]["min_count"] == 1
