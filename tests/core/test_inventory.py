"""A Node object -> its registered devices, or the reason it is unusable (reference §2.1, §2.2, §4.9)."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import VENDORS

from app.core.inventory import NodeUnregistered, decode_node, node_annotations, node_name
from app.core.model import DeviceInfo

REGISTER = "hami.io/node-nvidia-register"
ONE = (
    '[{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-T4",'
    '"mode":"hami-core","health":true}]'
)


def k8s_node(name: Any = "n1", annotations: Any = None) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "annotations": annotations}}


def test_decode_node() -> None:
    decoded = decode_node(
        k8s_node(
            annotations={
                REGISTER: ONE,
                "hami.io/device-cordon": " GPU-a ,GPU-x,",
                "hami.io/node-nvidia-score": '[{"uuid":"GPU-a","score":{"GPU-b":100}}]',
            }
        ),
        VENDORS,
    )
    assert decoded.name == "n1"
    assert decoded.cordoned == {"GPU-a", "GPU-x"}
    assert decoded.devices == (
        DeviceInfo(
            "GPU-a",
            0,
            10,
            32768,
            100,
            "NVIDIA-T4",
            0,
            "hami-core",
            True,
            "NVIDIA",
            pair_scores={"GPU-b": 100},
        ),
    )


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        (None, "no device registration"),
        ({}, "no device registration"),
        ({"hami.io/node-handshake": "Requesting_2026-08-01 06:00:00"}, "no device registration"),
        ({REGISTER: "[]"}, f"{REGISTER}: no gpu found on node"),
        ({REGISTER: "null"}, f"{REGISTER}: no gpu found on node"),
        ({REGISTER: "{oops"}, f"{REGISTER}: invalid register annotation"),
        (
            {REGISTER: '[{"id":"g","count":-1}]'},
            f"{REGISTER}: invalid register annotation: device 0: invalid count field",
        ),
        ({REGISTER: ONE, "hami.io/node-nvidia-score": "[oops"}, f"{REGISTER}: invalid pair-score annotation"),
        ({REGISTER: "GPU-a,10,7680,100,NVIDIA-Tesla P4,0,true:"}, f"{REGISTER}: invalid register annotation"),
    ],
    ids=[
        "annotations-null",
        "no-annotations",
        "handshake-only",
        "empty-array",
        "null-array",
        "bad-json",
        "negative-count",
        "bad-pair-scores-fail-the-node",
        "legacy-format-not-read-for-nvidia",
    ],
)
def test_unusable_nodes(annotations: Any, reason: str) -> None:
    with pytest.raises(NodeUnregistered) as info:
        decode_node(k8s_node(annotations=annotations), VENDORS)
    assert str(info.value).startswith(reason)


@pytest.mark.parametrize(
    ("node", "name", "annotations"),
    [
        ({"metadata": {"name": "a", "annotations": {"x": "1", "y": 2, 3: "z"}}}, "a", {"x": "1"}),
        ({"metadata": None}, "", {}),
        ({"metadata": {"name": 5, "annotations": ["x"]}}, "", {}),
        ({}, "", {}),
    ],
    ids=["string-values-only", "null-metadata", "wrong-types", "empty"],
)
def test_node_accessors_are_robust(node: dict[str, Any], name: str, annotations: dict[str, str]) -> None:
    assert node_name(node) == name
    assert node_annotations(node) == annotations
