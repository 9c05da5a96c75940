"""app.core.notes: what HAMi clamps or ignores is told, one sentence per value, for every vendor alike."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import pod

from app.core.admission import AdmissionSettings, admit
from app.core.notes import container_notes, controller_made, pod_notes
from app.core.review import AdmissionInput
from app.devices import build_vendors
from sim.workload.report import VENDORS


def ctr(limits: dict[str, Any], name: str = "main", **requests: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": limits}
    if requests:
        resources["requests"] = requests
    return {"name": name, "image": "x", "resources": resources}


def clamped(name: str, raw: str, per_device: str = "") -> str:
    return f"{name} {raw}{per_device} is more than one whole device (100): it is treated as 100, as HAMi does"


def ignored(count: str, others: str, verb: str, key: str) -> str:
    return f"{count} is 0, so {others} {verb} ignored: the container gets no {key} device (as HAMi does)"


def unset(name: str) -> str:
    return f"{name} 0 is read as unset: the container gets the whole device's memory, as HAMi does"


@pytest.mark.parametrize(
    ("limits", "notes"),
    [
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"},
            [clamped("nvidia.com/gpucores", "150")],
            id="nvidia-cores-above-100-clamped",
        ),
        pytest.param({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}, [], id="nvidia-cores-100-quiet"),
        pytest.param(
            {"nvidia.com/gpu": "0", "nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "30"},
            [ignored("nvidia.com/gpu", "nvidia.com/gpumem and nvidia.com/gpucores", "are", "NVIDIA")],
            id="nvidia-count-0-ignores-memory-and-cores",
        ),
        pytest.param({"nvidia.com/gpu": "0"}, [], id="nvidia-count-0-alone-quiet"),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "0"},
            [unset("nvidia.com/gpumem-percentage")],
            id="nvidia-percentage-0-is-unset",
        ),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "0"},
            [unset("nvidia.com/gpumem")],
            id="nvidia-memory-0-is-the-whole-card",
        ),
        pytest.param({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}, [], id="nvidia-plain-quiet"),
        pytest.param(
            {"amd.com/gpu": "0", "amd.com/gpumem": "1024"},
            [ignored("amd.com/gpu", "amd.com/gpumem", "is", "AMD")],
            id="amd-count-0-ignores-memory",
        ),
        pytest.param(
            {"amd.com/gpumem": "1024", "amd.com/gpucores": "50"},
            [
                "amd.com/gpumem and amd.com/gpucores are ignored without amd.com/gpu: the container gets no "
                "AMD device (as HAMi does)"
            ],
            id="amd-memory-and-cores-without-a-count",
        ),
        pytest.param(
            {"hygon.com/dcunum": "1", "hygon.com/dcucores": "120"},
            [clamped("hygon.com/dcucores", "120")],
            id="hygon-cores-clamped",
        ),
        pytest.param(
            {"cambricon.com/vmlu": "0", "cambricon.com/mlu.smlu.vcore": "10"},
            [ignored("cambricon.com/vmlu", "cambricon.com/mlu.smlu.vcore", "is", "MLU")],
            id="cambricon-count-0",
        ),
        pytest.param(
            {"mthreads.com/vgpu": "2", "mthreads.com/sgpu-core": "300"},
            [clamped("mthreads.com/sgpu-core", "300", " (150 per device)")],
            id="mthreads-cores-split-per-device",
        ),
        pytest.param(
            {"enflame.com/drs-gcu": "2", "enflame.com/gcu-memory": "8", "enflame.com/gcu-core": "50"},
            [
                "enflame.com/gcu-memory and enflame.com/gcu-core are ignored next to enflame.com/drs-gcu "
                "(a slice count), as HAMi does"
            ],
            id="enflame-drs-slices-ignore-memory-and-cores",
        ),
        pytest.param(
            {"kunlunxin.com/vxpu": "0", "kunlunxin.com/vxpu-memory": "24576"},
            [ignored("kunlunxin.com/vxpu", "kunlunxin.com/vxpu-memory", "is", "XPU")],
            id="kunlun-vxpu-count-0",
        ),
        pytest.param(
            {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "-5"}, [], id="refused-values-are-not-notes"
        ),
    ],
)
def test_container_notes(limits: dict[str, Any], notes: list[str]) -> None:
    assert container_notes(ctr(limits), VENDORS) == notes


def test_requests_count_like_limits() -> None:
    container = {
        "name": "c",
        "resources": {"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "200"}},
    }
    assert container_notes(container, VENDORS) == [
        "nvidia.com/gpucores 200 is more than one whole device (100): it is treated as 100, as HAMi does"
    ]


def test_pod_notes_name_the_container_init_containers_first() -> None:
    the_pod = pod(
        ctr({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}, "app"),
        init=(ctr({"nvidia.com/gpu": "0", "nvidia.com/gpumem": "10"}, "setup"),),
    )
    assert pod_notes(the_pod, VENDORS) == (
        "container setup: nvidia.com/gpu is 0, so nvidia.com/gpumem is ignored: the container gets no NVIDIA "
        "device (as HAMi does)",
        "container app: nvidia.com/gpucores 150 is more than one whole device (100): it is treated as 100, "
        "as HAMi does",
    )


def test_a_malformed_pod_has_no_notes() -> None:
    assert pod_notes({"spec": {"containers": "nope"}}, VENDORS) == ()


@pytest.mark.parametrize(
    ("metadata", "made"),
    [
        ({}, False),
        ({"ownerReferences": []}, False),
        (
            {"ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9", "uid": "u", "controller": True}]},
            True,
        ),
    ],
    ids=["no-owner", "empty-owners", "replicaset"],
)
def test_controller_made(metadata: dict[str, Any], made: bool) -> None:
    the_pod = pod(ctr({}))
    the_pod["metadata"].update(metadata)
    assert controller_made(the_pod) is made


def _review(the_pod: dict[str, Any]) -> AdmissionInput:
    return AdmissionInput(uid="u", operation="CREATE", pod=the_pod, namespace="ns")


def test_the_webhook_admits_as_hami_and_warns() -> None:
    the_pod = pod(ctr({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"}))
    outcome = admit(_review(the_pod), AdmissionSettings(), build_vendors({}), {})
    assert outcome.allowed and outcome.code == 200
    assert outcome.warnings == (
        "container main: nvidia.com/gpucores 150 is more than one whole device (100): it is treated as 100, "
        "as HAMi does",
    )
    assert outcome.pod is not None and outcome.pod["spec"]["schedulerName"] == "hami-scheduler"


def test_the_webhook_tells_nothing_for_pods_of_another_scheduler() -> None:
    the_pod = pod(ctr({"nvidia.com/gpu": "0", "nvidia.com/gpumem": "10"}))
    the_pod["spec"]["schedulerName"] = "volcano"
    outcome = admit(_review(the_pod), AdmissionSettings(), build_vendors({}), {})
    assert outcome.allowed and outcome.warnings == ()


def test_the_webhook_states_the_range_it_enforces_for_cores() -> None:
    the_pod = pod(ctr({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "-5"}))
    outcome = admit(_review(the_pod), AdmissionSettings(), build_vendors({}), {})
    assert (outcome.allowed, outcome.code) == (False, 400)
    assert outcome.message == (
        "invalid nvidia.com/gpucores value -5: must be a whole number between 0 and 2147483647 "
        "(percent of one GPU; above 100 counts as 100) in container main"
    )
