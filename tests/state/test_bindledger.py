"""The bind's view from the ledger (app/bindledger.py, issue 20): a row's allocation text splits back into
exactly the allocated lists the filter wrote, for every vendor's decisions, and the stamp's JSON Patch
tests them."""

from __future__ import annotations

import jsonpatch
import pytest
from core_builders import context
from hypothesis import HealthCheck, given, settings
from vendor_strategies import VENDORS, MixedScenario, scenarios

from app.bindledger import allocation_values, stamp_operations
from app.core.codec import encode_pod_single_device
from app.core.decision import allocation_annotations, decide
from app.k8s.events import PodRef

EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = sorted(v.key for v in VENDORS)


@EXAMPLES
@given(scenarios(max_nodes=2))
def test_a_rows_allocation_splits_into_the_written_lists(scenario: MixedScenario) -> None:
    ctx = context(
        scenario.pod, gpu_policy=scenario.gpu_policy, node_policy=scenario.node_policy, vendors=VENDORS
    )
    nodes = {n.name: n for n in scenario.nodes}
    winner = decide(ctx, list(nodes), nodes, scenario.usage, VENDORS).winner
    if winner is None or winner.devices is None:
        return
    allocation = ";".join(f"{k}={encode_pod_single_device(c)}" for k, c in sorted(winner.devices.items()))
    written = allocation_annotations(winner.node, winner.devices, VENDORS, 1, scenario.pod)
    by_key = {v.key: v for v in VENDORS}
    values = allocation_values(allocation, KEYS)
    assert set(values) == set(winner.devices)
    for key, value in values.items():
        assert written[by_key[key].allocated_annotation] == value, key


@pytest.mark.parametrize(
    ("allocation", "expected"),
    [
        ("NVIDIA=G0,NVIDIA,10,0:;", {"NVIDIA": "G0,NVIDIA,10,0:;"}),
        (
            "DCU=;;NVIDIA=G0,NVIDIA,10,0:;G1,NVIDIA,5,0:;",
            {"DCU": ";", "NVIDIA": "G0,NVIDIA,10,0:;G1,NVIDIA,5,0:;"},
        ),
        ("MLU=a,MLU,1,1:b,MLU,1,1:;;;NVIDIA=;;", {"MLU": "a,MLU,1,1:b,MLU,1,1:;;", "NVIDIA": ";;"}),
        ("", {}),
    ],
    ids=["one", "padded-first", "two-containers", "empty"],
)
def test_allocation_values(allocation: str, expected: dict[str, str]) -> None:
    assert allocation_values(allocation, KEYS) == expected


def test_the_stamp_applies_only_to_the_vouched_pod() -> None:
    from app.bindledger import Vouched
    from app.state.ledger import CONFIRMED, Entry

    row = Entry("u1", "ns", "p", "n1", CONFIRMED, {}, allocation="NVIDIA=G0,NVIDIA,10,0:;")
    known = Vouched(row, {"hami.io/vgpu-devices-allocated": "G0,NVIDIA,10,0:;"}, frozenset({"NVIDIA"}))
    operations = stamp_operations(PodRef("ns", "p", "u1"), "n1", known, 7)
    notes = {"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "G0,NVIDIA,10,0:;"}
    pod = {"metadata": {"uid": "u1", "annotations": notes}}
    stamped = jsonpatch.apply_patch(pod, operations)
    assert stamped["metadata"]["annotations"]["hami.io/bind-phase"] == "allocating"
    assert stamped["metadata"]["annotations"]["hami.io/bind-time"] == "7"
    for changed in ({"uid": "u2"}, {"annotations": {**notes, "hami.io/vgpu-node": "n2"}}):
        with pytest.raises(jsonpatch.JsonPatchTestFailed):
            jsonpatch.apply_patch({"metadata": {**pod["metadata"], **changed}}, operations)
