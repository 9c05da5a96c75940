"""app/core/dra.py: which of our resource names and registered nodes kube-scheduler's DRA also serves, and
the refusals built on that (docs/compatibility.md, DRA side by side)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core import dra
from app.core.dra import Collision, DraFacts, Overlap
from app.devices import build_vendors
from app.devices.dra import DRIVERS, drivers_for

VENDORS = build_vendors(None)  # NVIDIA (and the families enabled by default)


def device_class(name: str, extended: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}
    if extended is not None:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def resource_slice(
    node: str | None, driver: str = "gpu.nvidia.com", devices: int = 2, **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": node or "pool", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {"kind": "ResourceSlice", "metadata": {"name": f"{node}-{driver}"}, "spec": body}


def pod(*requests: dict[str, str], init: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": {"limits": r}} for i, r in enumerate(requests)]
    }
    if init is not None:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": init}}]
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def test_managed_names_are_every_vendor_resource() -> None:
    managed = dra.managed_names(VENDORS)
    assert managed["nvidia.com/gpu"] == "NVIDIA"
    assert managed["nvidia.com/gpumem"] == "NVIDIA"
    assert managed["nvidia.com/gpucores"] == "NVIDIA"
    assert "" not in managed


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        pytest.param([], (), id="no-classes"),
        pytest.param([device_class("gpu.nvidia.com")], (), id="class-without-extended-name"),
        pytest.param(
            [device_class("gpu.nvidia.com", "nvidia.com/gpu")],
            (Collision("nvidia.com/gpu", "NVIDIA", ("gpu.nvidia.com",)),),
            id="explicit-name-collides",
        ),
        pytest.param([device_class("fpga", "example.com/fpga")], (), id="foreign-name-no-collision"),
        pytest.param(
            [device_class("b", "nvidia.com/gpu"), device_class("a", "nvidia.com/gpu")],
            (Collision("nvidia.com/gpu", "NVIDIA", ("a", "b")),),
            id="two-classes-one-name-sorted",
        ),
        pytest.param(
            [device_class("a", "nvidia.com/gpumem"), device_class("b", "nvidia.com/gpu")],
            (
                Collision("nvidia.com/gpu", "NVIDIA", ("b",)),
                Collision("nvidia.com/gpumem", "NVIDIA", ("a",)),
            ),
            id="two-names-sorted-by-resource",
        ),
        pytest.param(
            [{"metadata": {}, "spec": {"extendedResourceName": "nvidia.com/gpu"}}], (), id="nameless"
        ),
        pytest.param([{"spec": "garbage"}, "not-an-object-either"], (), id="malformed-ignored"),
    ],
)
def test_collisions(classes: list[Any], expected: tuple[Collision, ...]) -> None:
    assert dra.collisions([c for c in classes if isinstance(c, dict)], VENDORS) == expected


def test_implicit_class_name_is_served_too() -> None:
    served = dra.class_resource_names([device_class("gpu.example.com")])
    assert served == {"deviceclass.resource.kubernetes.io/gpu.example.com": ("gpu.example.com",)}


@pytest.mark.parametrize(
    ("slices", "registered", "expected"),
    [
        pytest.param([], {"gpu-0"}, (), id="no-slices"),
        pytest.param(
            [resource_slice("gpu-0")], {"gpu-0"}, (Overlap("gpu-0", ("gpu.nvidia.com",), 2),), id="overlap"
        ),
        pytest.param([resource_slice("gpu-9")], {"gpu-0"}, (), id="dra-only-node-is-not-ours"),
        pytest.param([resource_slice("gpu-0", "nic.example.com")], {"gpu-0"}, (), id="foreign-driver"),
        pytest.param([resource_slice("gpu-0", devices=0)], {"gpu-0"}, (), id="no-devices"),
        pytest.param([resource_slice(None, allNodes=True)], {"gpu-0"}, (), id="network-attached"),
        pytest.param(
            [
                resource_slice("gpu-0"),
                resource_slice("gpu-0", "hami-core-gpu.project-hami.io", 3),
                resource_slice("gpu-1", "mig.nvidia.com", 1),
            ],
            {"gpu-0", "gpu-1"},
            (
                Overlap("gpu-0", ("gpu.nvidia.com", "hami-core-gpu.project-hami.io"), 5),
                Overlap("gpu-1", ("mig.nvidia.com",), 1),
            ),
            id="drivers-summed-per-node",
        ),
    ],
)
def test_overlaps(slices: list[dict[str, Any]], registered: set[str], expected: tuple[Overlap, ...]) -> None:
    assert dra.overlaps(slices, DRIVERS, registered) == expected


def test_drivers_of_disabled_vendors_are_ignored() -> None:
    assert drivers_for({"NVIDIA"}) == {d: k for d, k in DRIVERS.items() if k == "NVIDIA"}
    assert dra.overlaps([resource_slice("n", "gpu.amd.com")], drivers_for({"NVIDIA"}), {"n"}) == ()


def test_facts_without_the_api_are_unavailable_and_empty() -> None:
    facts = dra.facts(None, None, VENDORS, DRIVERS, {"gpu-0"}, 7.0)
    assert facts == DraFacts(False, (), (), 7.0)
    assert not facts.any


def test_facts_with_the_api() -> None:
    facts = dra.facts(
        [device_class("gpu.nvidia.com", "nvidia.com/gpu")],
        [resource_slice("gpu-0")],
        VENDORS,
        DRIVERS,
        ["gpu-0"],
        1.0,
    )
    assert facts.available and facts.any
    assert set(facts.served()) == {"nvidia.com/gpu"}
    assert set(facts.overlapped()) == {"gpu-0"}


COLLIDED = DraFacts(True, (Collision("nvidia.com/gpu", "NVIDIA", ("gpu.nvidia.com",)),))


@pytest.mark.parametrize(
    ("facts", "the_pod", "refused"),
    [
        pytest.param(COLLIDED, pod({"nvidia.com/gpu": "1"}), True, id="asks-collided-name"),
        pytest.param(COLLIDED, pod({"cpu": "1"}, {"nvidia.com/gpu": "1"}), True, id="second-container"),
        pytest.param(COLLIDED, pod({"cpu": "1"}, init={"nvidia.com/gpu": "1"}), True, id="init-container"),
        pytest.param(COLLIDED, pod({"nvidia.com/gpumem": "1000"}), False, id="other-name-not-served"),
        pytest.param(COLLIDED, pod({"cpu": "1"}), False, id="no-device"),
        pytest.param(DraFacts(True), pod({"nvidia.com/gpu": "1"}), False, id="no-collision"),
        pytest.param(COLLIDED, {"spec": {"containers": "garbage"}}, False, id="malformed-pod"),
    ],
)
def test_pod_refusal_and_warning(facts: DraFacts, the_pod: dict[str, Any], refused: bool) -> None:
    reason, warning = dra.pod_refusal(facts, the_pod), dra.pod_warning(facts, the_pod)
    assert bool(reason) is refused and bool(warning) is refused
    if refused:
        assert reason.startswith("hami-scheduler: nvidia.com/gpu is served by DRA DeviceClass gpu.nvidia.com")
        assert "nvidia.com/gpu (DeviceClass gpu.nvidia.com)" in warning


def test_asks_managed() -> None:
    assert dra.asks_managed(pod({"nvidia.com/gpumem": "1"}), VENDORS)
    assert not dra.asks_managed(pod({"cpu": "1", "example.com/fpga": "1"}), VENDORS)


def test_node_refusal_names_the_driver_and_devices() -> None:
    reason = dra.node_refusal(Overlap("gpu-0", ("gpu.nvidia.com",), 4))
    assert reason.startswith(
        "hami-scheduler: node gpu-0 also publishes 4 devices through DRA driver gpu.nvidia.com"
    )


names = st.sampled_from(
    ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "example.com/x", "cpu"]
)


@given(st.lists(st.tuples(st.text(min_size=1, max_size=5), st.one_of(st.none(), names)), max_size=6))
def test_every_collision_is_a_managed_name_served_by_a_listed_class(
    classes: list[tuple[str, str | None]],
) -> None:
    objects = [device_class(n, e) for n, e in classes]
    managed = dra.managed_names(VENDORS)
    for collision in dra.collisions(objects, VENDORS):
        assert managed[collision.resource] == collision.vendor
        assert all(any(n == c and e == collision.resource for n, e in classes) for c in collision.classes)
    explicit = {e for _, e in classes if e in managed}
    assert {c.resource for c in dra.collisions(objects, VENDORS)} == explicit
