"""Namespace GPU quotas: limits, usage, FitQuota and the admission check (reference §6.3)."""

from __future__ import annotations

from typing import Any

import pytest
from core_builders import NVIDIA, VENDORS, ctr, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.model import ContainerDevice, QuotaEntry, QuotaView
from app.core.pods import pod_requests
from app.core.quota import (
    admission_excess,
    build_view,
    fits,
    limited,
    pod_quota_use,
    quota_limits,
    tracked_resources,
)
from app.devices.nvidia import Nvidia, NvidiaConfig

MEM, CORES = "nvidia.com/gpumem", "nvidia.com/gpucores"


def rq(namespace: str | None, hard: dict[str, Any], name: str = "q") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"kind": "ResourceQuota", "metadata": metadata, "spec": {"hard": hard}}


def test_tracked_resources() -> None:
    assert tracked_resources(VENDORS) == {MEM, CORES}
    custom = Nvidia(NvidiaConfig(resource_memory_name="x/mem", resource_core_name=""))
    assert tracked_resources([custom]) == {"x/mem"}


@pytest.mark.parametrize(
    ("quotas", "expected"),
    [
        (
            [rq("a", {"limits.nvidia.com/gpumem": "10000", "limits.nvidia.com/gpucores": 200})],
            {"a": {MEM: 10000, CORES: 200}},
        ),
        (
            [
                rq(
                    "a",
                    {
                        "requests.nvidia.com/gpumem": "1",
                        "nvidia.com/gpumem": "1",
                        "limits.nvidia.com/gpu": "2",
                    },
                )
            ],
            {},
        ),
        ([rq("a", {"limits.nvidia.com/gpumem-percentage": "50", "limits.cpu": "2"})], {}),
        ([rq("a", {"limits.nvidia.com/gpumem": "1.5"})], {}),
        ([rq("a", {"limits.nvidia.com/gpumem": "1Gi"})], {"a": {MEM: 2**30}}),
        ([rq("a", {"limits.nvidia.com/gpumem": "0"})], {"a": {MEM: 0}}),
        (
            [
                rq("a", {"limits.nvidia.com/gpumem": "800"}),
                rq("a", {"limits.nvidia.com/gpumem": "500"}, "q2"),
            ],
            {"a": {MEM: 500}},
        ),
        (
            [
                rq("a", {"limits.nvidia.com/gpumem": "500"}),
                rq("a", {"limits.nvidia.com/gpumem": "800"}, "q2"),
            ],
            {"a": {MEM: 500}},
        ),
        ([rq(None, {"limits.nvidia.com/gpumem": "1"})], {}),
        ([{"metadata": {"namespace": "a"}, "spec": None}], {}),
        (
            [rq("a", {"limits.nvidia.com/gpumem": "1"}), rq("b", {"limits.nvidia.com/gpucores": "2"})],
            {"a": {MEM: 1}, "b": {CORES: 2}},
        ),
    ],
    ids=[
        "memory-and-cores",
        "requests-counts-and-bare-names-not-tracked",
        "percentage-and-cpu-not-tracked",
        "non-integral-ignored",
        "binary-suffix-as-integer",
        "explicit-zero",
        "smallest-limit-wins",
        "smallest-limit-wins-any-order",
        "no-namespace",
        "no-spec",
        "per-namespace",
    ],
)
def test_quota_limits(quotas: list[dict[str, Any]], expected: dict[str, dict[str, int]]) -> None:
    assert quota_limits(quotas, VENDORS) == expected


def test_pod_quota_use_and_build_view() -> None:
    collapsed = {
        "NVIDIA": (
            (
                ContainerDevice("A", "NVIDIA", 16384, 0, slots=1),
                ContainerDevice("B", "NVIDIA", 19384, 30, slots=2),
            ),
        )
    }
    assert pod_quota_use(collapsed, VENDORS) == {MEM: 35768, CORES: 30}
    assert pod_quota_use({"UNKNOWN": ((ContainerDevice("A", "X", 1, 1),),)}, VENDORS) == {}
    view = build_view({"a": {MEM: 100}}, {"a": {MEM: 40, CORES: 10}, "b": {MEM: 1}})
    assert view == {
        "a": {MEM: QuotaEntry(40, 100, True), CORES: QuotaEntry(10, 0, False)},
        "b": {MEM: QuotaEntry(1, 0, False)},
    }


def _view(mem: QuotaEntry | None = None, cores: QuotaEntry | None = None) -> dict[str, dict[str, QuotaEntry]]:
    entries = {}
    if mem is not None:
        entries[MEM] = mem
    if cores is not None:
        entries[CORES] = cores
    return {"ns": entries}


FACTOR_4 = Nvidia(NvidiaConfig(memory_factor=4))


@pytest.mark.parametrize(
    ("view", "vendor", "mem", "cores", "expected"),
    [
        ({}, NVIDIA, 10**9, 10**9, True),
        (_view(), NVIDIA, 10**9, 10**9, True),
        (_view(QuotaEntry(50, 0, False)), NVIDIA, 10**9, 0, True),
        (_view(QuotaEntry(40, 100, True)), NVIDIA, 60, 0, True),
        (_view(QuotaEntry(40, 100, True)), NVIDIA, 61, 0, False),
        (_view(QuotaEntry(0, 0, True)), NVIDIA, 1, 0, False),
        (_view(QuotaEntry(0, 0, True)), NVIDIA, 0, 0, True),
        (_view(QuotaEntry(0, 100, True)), FACTOR_4, 400, 0, True),
        (_view(QuotaEntry(0, 100, True)), FACTOR_4, 401, 0, False),
        (_view(cores=QuotaEntry(50, 100, True)), FACTOR_4, 0, 50, True),
        (_view(cores=QuotaEntry(50, 100, True)), FACTOR_4, 0, 51, False),
        (_view(cores=QuotaEntry(0, 0, True)), NVIDIA, 0, 1, False),
        (_view(QuotaEntry(0, 10, True), QuotaEntry(0, 10, True)), NVIDIA, 10, 11, False),
        (_view(QuotaEntry(200, 100, True)), NVIDIA, 0, 0, False),
    ],
    ids=[
        "namespace-absent",
        "no-entries",
        "used-without-limit",
        "at-limit",
        "over-limit",
        "explicit-zero-blocks",
        "explicit-zero-allows-nothing-more",
        "memory-factor-scales-limit",
        "memory-factor-over",
        "cores-not-scaled",
        "cores-over",
        "zero-core-limit-blocks",
        "cores-checked-after-memory",
        "already-over-limit",
    ],
)
def test_fits(view: QuotaView, vendor: Nvidia, mem: int, cores: int, expected: bool) -> None:
    assert fits(view, "ns", vendor, mem, cores) is expected


def _admits(the_pod: dict[str, Any], view: QuotaView, vendor: Nvidia = NVIDIA) -> bool:
    return admission_excess(pod_requests(the_pod, [vendor]), [vendor], view, "ns") is None


@pytest.mark.parametrize(
    ("the_pod", "view", "expected"),
    [
        (pod(ctr("a", gpu=2, mem=3000), ctr("b", gpu=1, mem=4000)), _view(QuotaEntry(0, 10000, True)), True),
        (pod(ctr("a", gpu=2, mem=3000), ctr("b", gpu=1, mem=4001)), _view(QuotaEntry(0, 10000, True)), False),
        (
            pod(ctr("a", gpu=1, mem=1000), init=[ctr("i", gpu=2, mem=5000)]),
            _view(QuotaEntry(0, 10000, True)),
            True,
        ),
        (
            pod(ctr("a", gpu=1, mem=1000), init=[ctr("i", gpu=2, mem=5001)]),
            _view(QuotaEntry(0, 10000, True)),
            False,
        ),
        (
            pod(ctr("a", gpu=1, mem=6000), init=[ctr("i", gpu=1, mem=6000), ctr("j", gpu=1, mem=6000)]),
            _view(QuotaEntry(0, 6000, True)),
            True,
        ),
        (pod(ctr("a", gpu=4, pct=100)), _view(QuotaEntry(0, 0, True)), True),
        (pod(ctr("a", gpu=1, cores=100)), _view(cores=QuotaEntry(0, 100, True)), True),
        (pod(ctr("a", gpu=2, cores=100)), _view(cores=QuotaEntry(0, 100, True)), False),
        (pod(ctr("a", gpu=1, cores=100)), _view(cores=QuotaEntry(0, 0, True)), False),
        (pod(ctr("a"), ctr("b", gpu=0, mem=5)), _view(QuotaEntry(0, 0, True)), True),
        (pod(ctr("a", gpu=1, mem=100)), {"other": _view(QuotaEntry(0, 0, True))["ns"]}, True),
        (pod(ctr("a", gpu=1, mem=100)), _view(QuotaEntry(9901, 10000, True)), False),
    ],
    ids=[
        "app-sum-times-nums-fits",
        "app-sum-over",
        "init-max-times-nums-fits",
        "init-max-over",
        "init-peak-vs-app-not-added",
        "percentage-counts-as-zero",
        "exclusive-counts-100-cores-per-gpu",
        "two-exclusive-gpus-over",
        "explicit-zero-cores-blocks",
        "no-device-request-skipped",
        "other-namespace",
        "others-usage-counts",
    ],
)
def test_admission_fits(the_pod: dict[str, Any], view: QuotaView, expected: bool) -> None:
    assert _admits(the_pod, view) is expected


def test_admission_fits_uses_the_memory_factor() -> None:
    the_pod = pod(ctr("a", gpu=1, mem=100))  # 400 MiB after the factor
    assert _admits(the_pod, _view(QuotaEntry(0, 100, True)), FACTOR_4) is True
    assert _admits(the_pod, _view(QuotaEntry(1, 100, True)), FACTOR_4) is False


@pytest.mark.parametrize(
    ("the_pod", "view", "vendor", "expected"),
    [
        (
            pod(ctr("a", gpu=2, mem=3000), ctr("b", gpu=1, mem=4001)),
            _view(QuotaEntry(0, 10000, True)),
            NVIDIA,
            "limits.nvidia.com/gpumem in namespace ns: used 0, limit 10000, requested 10001",
        ),
        (
            pod(ctr("a", gpu=2, cores=100)),
            _view(cores=QuotaEntry(30, 100, True)),
            NVIDIA,
            "limits.nvidia.com/gpucores in namespace ns: used 30, limit 100, requested 200",
        ),
        (
            pod(ctr("a", gpu=1, mem=100)),
            _view(QuotaEntry(1, 100, True)),
            FACTOR_4,
            "limits.nvidia.com/gpumem in namespace ns: used 1, limit 400 (100 x memoryFactor 4), "
            "requested 400",
        ),
        (pod(ctr("a", gpu=1, mem=100)), _view(QuotaEntry(0, 100, True)), NVIDIA, None),
    ],
    ids=["memory-over", "cores-over", "memory-factor-scales-the-limit", "fits"],
)
def test_admission_excess_names_the_resource_usage_limit_and_request(
    the_pod: dict[str, Any], view: QuotaView, vendor: Nvidia, expected: str | None
) -> None:
    assert admission_excess(pod_requests(the_pod, [vendor]), [vendor], view, "ns") == expected


def test_admission_fits_skips_vendors_without_quota_resources() -> None:
    no_names = Nvidia(NvidiaConfig(resource_memory_name="", resource_core_name=""))
    the_pod = pod(ctr("a", gpu=1))
    assert _admits(the_pod, _view(QuotaEntry(0, 0, True), QuotaEntry(0, 0, True)), no_names) is True


_ENTRIES = st.builds(QuotaEntry, st.integers(0, 10**6), st.integers(0, 10**6), st.booleans())


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from([MEM, CORES, "other"]), _ENTRIES),
    st.sampled_from(["ns", "elsewhere"]),
    st.sampled_from([NVIDIA, FACTOR_4]),
    st.integers(0, 10**7),
    st.integers(0, 10**7),
)
def test_fits_refuses_only_where_a_limit_is_set(
    entries: dict[str, QuotaEntry], namespace: str, vendor: Nvidia, mem: int, cores: int
) -> None:
    """`limited` false: `fits` is true whatever the amounts (app/core/fit.py then computes none)."""
    view = {"ns": entries}
    assert limited(view, namespace, vendor) == any(
        e.limit_set for name, e in entries.items() if namespace == "ns" and name in (MEM, CORES)
    )
    if not limited(view, namespace, vendor):
        assert fits(view, namespace, vendor, mem, cores)
