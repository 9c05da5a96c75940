"""Typed reads of a Pod given as JSON, and the per-pod request list (reference §3.2)."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import VENDORS, ctr, pod

from app.core import pods
from app.core.model import PERCENT_UNSET, DeviceRequest
from app.core.vendor import InvalidRequest


def test_pod_requests_init_first_and_only_requesting_vendors() -> None:
    the_pod = pod(ctr("a", gpu=2, mem=4096), ctr("b"), init=[ctr("i", gpu=1, pct=50), ctr("j", gpu=0)])
    requests = pods.pod_requests(the_pod, VENDORS)
    assert requests.init_count == 2
    assert requests.containers == (
        {"NVIDIA": DeviceRequest(1, "NVIDIA", 0, 50, 0)},
        {},
        {"NVIDIA": DeviceRequest(2, "NVIDIA", 4096, PERCENT_UNSET, 0)},
        {},
    )
    assert requests.any


def test_pod_requests_names_the_container_of_an_invalid_value() -> None:
    with pytest.raises(InvalidRequest, match=r"nvidia.com/gpumem value 16Gi.* in container big$"):
        pods.pod_requests(pod(ctr("ok", gpu=1), ctr("big", gpu=1, mem="16Gi")), VENDORS)


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        ({"resources": {"limits": {"x": "1"}, "requests": {"x": "2"}}}, "1"),
        ({"resources": {"requests": {"x": "2"}}}, "2"),
        ({"resources": {"limits": {"y": "1"}, "requests": {"x": 3}}}, 3),
        ({"resources": {}}, None),
        ({}, None),
        ({"resources": {"limits": None, "requests": None}}, None),
    ],
    ids=[
        "limits-first",
        "requests-fallback",
        "requests-when-not-in-limits",
        "empty",
        "no-resources",
        "null-sections",
    ],
)
def test_resource_lookup(container: dict[str, Any], expected: Any) -> None:
    assert pods.resource(container, "x") == expected


def test_limit_reads_limits_only() -> None:
    assert pods.limit({"resources": {"requests": {"x": "1"}}}, "x") is None
    assert pods.limit({"resources": {"limits": {"x": "1"}}}, "x") == "1"


@pytest.mark.parametrize(
    ("the_pod", "expected"),
    [
        ({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}, ("p", "ns", "u")),
        ({"metadata": {}}, ("", "default", "")),
        ({}, ("", "default", "")),
        ({"metadata": {"name": 1, "namespace": 2, "uid": 3}}, ("", "default", "")),
        ({"metadata": {"namespace": ""}}, ("", "default", "")),
    ],
    ids=["all-set", "empty-metadata", "no-metadata", "wrong-types", "empty-namespace"],
)
def test_identity(the_pod: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert (pods.name(the_pod), pods.namespace(the_pod), pods.uid(the_pod)) == expected


def test_annotations_and_labels_keep_strings_only() -> None:
    the_pod = {"metadata": {"annotations": {"a": "1", "b": 2, "c": None}, "labels": {"l": "v", "n": 1}}}
    assert pods.annotations_of(the_pod) == {"a": "1"}
    assert pods.labels_of(the_pod) == {"l": "v"}
    assert pods.annotations_of({}) == {} and pods.labels_of({}) == {}


@pytest.mark.parametrize(
    ("the_pod", "message"),
    [
        ({"metadata": "x"}, "metadata must be an object"),
        ({"metadata": {"annotations": ["a"]}}, "metadata.annotations must be an object"),
        ({"spec": []}, "spec must be an object"),
        ({"spec": {"containers": "abc"}}, "spec.containers must be a list"),
        ({"spec": {"containers": {"a": 1}}}, "spec.containers must be a list"),
        ({"spec": {"initContainers": [1]}}, r"spec.initContainers\[0\] must be an object"),
        ({"spec": {"containers": [{"resources": []}]}}, "resources must be an object"),
        ({"spec": {"containers": [{"resources": {"limits": "x"}}]}}, "resources.limits must be an object"),
    ],
    ids=[
        "metadata",
        "annotations",
        "spec",
        "containers-string",
        "containers-object",
        "init-entry",
        "resources",
        "limits",
    ],
)
def test_malformed_pods_raise_pod_error(the_pod: dict[str, Any], message: str) -> None:
    with pytest.raises(pods.PodError, match=message):
        pods.annotations_of(the_pod)
        pods.pod_requests(the_pod, VENDORS)


def test_container_lists() -> None:
    the_pod = pod(ctr("a"), init=[ctr("i")])
    assert [pods.container_name(c) for c in pods.containers(the_pod)] == ["a"]
    assert [pods.container_name(c) for c in pods.init_containers(the_pod)] == ["i"]
    assert pods.containers({"spec": {"containers": None}}) == []
    assert pods.container_name({"name": 5}) == ""


@pytest.mark.parametrize(
    ("status", "phase", "terminated"),
    [
        ({"phase": "Succeeded"}, "Succeeded", True),
        ({"phase": "Failed"}, "Failed", True),
        ({"phase": "Running"}, "Running", False),
        ({"phase": 3}, "", False),
        (None, "", False),
    ],
    ids=["succeeded", "failed", "running", "wrong-type", "no-status"],
)
def test_phase(status: Any, phase: str, terminated: bool) -> None:
    the_pod = {"status": status}
    assert pods.phase(the_pod) == phase
    assert pods.is_terminated(the_pod) is terminated
