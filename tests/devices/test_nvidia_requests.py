"""NVIDIA `GenerateResourceRequests`: container resources -> a device request (reference §3.1)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.model import PERCENT_UNSET, DeviceRequest
from app.core.vendor import InvalidRequest
from app.devices.nvidia import NvidiaConfig
from app.devices.nvidia.requests import container_request

INT32_MAX = 2**31 - 1
DEFAULT = NvidiaConfig()
GPU, MEM, PCT, CORES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)


def limits(**values: Any) -> dict[str, Any]:
    names = {"gpu": GPU, "mem": MEM, "pct": PCT, "cores": CORES}
    return {"name": "c", "resources": {"limits": {names[k]: v for k, v in values.items()}}}


def R(nums: int, memreq: int = 0, pct: int = PERCENT_UNSET, cores: int = 0) -> DeviceRequest:
    return DeviceRequest(nums, "NVIDIA", memreq, pct, cores)


@pytest.mark.parametrize(
    ("container", "config", "expected"),
    [
        # the examples of §3.1
        (limits(gpu=1), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=2, mem=4096), DEFAULT, R(2, 4096, PERCENT_UNSET, 0)),
        (limits(gpu=1, pct=50), DEFAULT, R(1, 0, 50, 0)),
        (limits(gpu=1, pct=150), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1, pct=0), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1), NvidiaConfig(default_memory=512), R(1, 512, PERCENT_UNSET, 0)),
        (limits(gpu=1, mem=1024), NvidiaConfig(memory_factor=2), R(1, 2048, PERCENT_UNSET, 0)),
        # more edges
        (limits(gpu="1", mem="4096", pct="100", cores="30"), DEFAULT, R(1, 4096, 100, 30)),
        (limits(gpu=1, pct=-5), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1, pct=-5), NvidiaConfig(default_memory=512), R(1, 512, PERCENT_UNSET, 0)),
        (limits(gpu=1, pct=100), NvidiaConfig(default_memory=512), R(1, 0, 100, 0)),
        (limits(gpu=1, pct=101), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1, pct=1), DEFAULT, R(1, 0, 1, 0)),
        (limits(gpu=1, pct="50.5"), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1, pct="junk"), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1, mem=0), DEFAULT, R(1, 0, 100, 0)),
        (limits(gpu=1, mem=0), NvidiaConfig(default_memory=256), R(1, 256, PERCENT_UNSET, 0)),
        (limits(gpu=1), NvidiaConfig(default_memory=512, memory_factor=4), R(1, 512, PERCENT_UNSET, 0)),
        (limits(gpu=1, mem=INT32_MAX), DEFAULT, R(1, INT32_MAX, PERCENT_UNSET, 0)),
        (
            limits(gpu=1, mem=INT32_MAX // 2),
            NvidiaConfig(memory_factor=2),
            R(1, INT32_MAX - 1, PERCENT_UNSET, 0),
        ),
        (limits(gpu=1, mem=5), NvidiaConfig(memory_factor=0), R(1, 5, PERCENT_UNSET, 0)),
        (limits(gpu=1), NvidiaConfig(default_cores=30), R(1, 0, 100, 30)),
        (limits(gpu=1, cores=50), NvidiaConfig(default_cores=30), R(1, 0, 100, 50)),
        (limits(gpu=1, cores=0), NvidiaConfig(default_cores=30), R(1, 0, 100, 0)),
        (limits(gpu=1, cores=150), DEFAULT, R(1, 0, 100, 150)),
        (limits(gpu=INT32_MAX), DEFAULT, R(INT32_MAX, 0, 100, 0)),
        (limits(gpu="1k"), DEFAULT, R(1000, 0, 100, 0)),
    ],
    ids=[
        "gpu-only",
        "memory",
        "percentage",
        "percentage-clamped-to-100",
        "percentage-zero-is-unset",
        "default-memory",
        "memory-factor",
        "quantity-strings-and-both-memory-forms",
        "negative-percentage-is-unset",
        "negative-percentage-then-default-memory",
        "percentage-beats-default-memory",
        "percentage-101-clamped",
        "percentage-one",
        "fractional-percentage-ignored",
        "garbage-percentage-ignored",
        "memory-zero-is-unset",
        "memory-zero-then-default-memory",
        "default-memory-not-multiplied-by-factor",
        "memory-int32-max",
        "memory-at-factor-limit",
        "factor-zero-counts-as-one",
        "default-cores",
        "cores-override-default",
        "cores-zero-override-default",
        "cores-over-100-kept-until-fit",
        "count-int32-max",
        "count-with-suffix",
    ],
)
def test_container_request(container: dict[str, Any], config: NvidiaConfig, expected: DeviceRequest) -> None:
    assert container_request(config, container) == expected


@pytest.mark.parametrize(
    "container",
    [
        {"name": "c"},
        {"name": "c", "resources": {"limits": {MEM: 4096, CORES: 50}}},
        limits(gpu=0, mem=1),
        limits(gpu="1.5"),
        limits(gpu="500m"),
        limits(gpu="junk"),
        limits(gpu=True),
    ],
    ids=[
        "no-resources",
        "memory-and-cores-without-count",
        "count-zero",
        "fractional-count",
        "milli-count",
        "garbage-count",
        "bool-count",
    ],
)
def test_containers_asking_for_nothing(container: dict[str, Any]) -> None:
    assert container_request(DEFAULT, container) is None


def test_lookup_is_limits_then_requests() -> None:
    container = {
        "name": "c",
        "resources": {
            "limits": {GPU: 2, MEM: 1000},
            "requests": {GPU: 1, MEM: 2000, CORES: 40, PCT: 30},
        },
    }
    assert container_request(DEFAULT, container) == R(2, 1000, 30, 40)
    requests_only = {"name": "c", "resources": {"requests": {GPU: 1, MEM: 2000}}}
    assert container_request(DEFAULT, requests_only) == R(1, 2000, PERCENT_UNSET, 0)


@pytest.mark.parametrize(
    ("container", "config", "message"),
    [
        (limits(gpu=1, mem="16Gi"), DEFAULT, "invalid nvidia.com/gpumem value 16Gi"),
        (
            limits(gpu=1, mem=INT32_MAX + 1),
            DEFAULT,
            f"must be a whole number of MiB between 0 and {INT32_MAX}",
        ),
        (
            limits(gpu=1, mem=INT32_MAX // 2 + 1),
            NvidiaConfig(memory_factor=2),
            f"between 0 and {INT32_MAX // 2}",
        ),
        (limits(gpu=1, mem=-1), DEFAULT, "invalid nvidia.com/gpumem value -1"),
        (limits(gpu=1, mem="1.5"), DEFAULT, "invalid nvidia.com/gpumem value 1.5"),
        (limits(gpu=1, mem="junk"), DEFAULT, "invalid nvidia.com/gpumem value junk"),
        (limits(gpu=INT32_MAX + 1), DEFAULT, f"must be between 1 and {INT32_MAX}"),
        (limits(gpu=-1), DEFAULT, "invalid nvidia.com/gpu value -1"),
        (limits(gpu=1, cores="1.5"), DEFAULT, "invalid nvidia.com/gpucores value 1.5"),
        (limits(gpu=1, cores=-10), DEFAULT, "invalid nvidia.com/gpucores value -10"),
        (limits(gpu=1, mem=[1]), DEFAULT, "invalid nvidia.com/gpumem value list"),
    ],
    ids=[
        "gibibytes-read-as-mib",
        "memory-over-int32",
        "memory-over-int32-after-factor",
        "negative-memory",
        "fractional-memory",
        "garbage-memory",
        "count-over-int32",
        "negative-count",
        "fractional-cores",
        "negative-cores",
        "memory-not-a-quantity",
    ],
)
def test_refused_values(container: dict[str, Any], config: NvidiaConfig, message: str) -> None:
    # HAMi drops the whole request (quirk #5) and the pod is treated as non-GPU; we refuse instead.
    with pytest.raises(InvalidRequest, match=message):
        container_request(config, container)


def test_custom_resource_names() -> None:
    config = NvidiaConfig(
        resource_count_name="hami.io/gpu",
        resource_memory_name="hami.io/gpumem",
        resource_memory_percentage_name="hami.io/gpumem-percentage",
        resource_core_name="hami.io/gpucores",
    )
    container = {
        "name": "c",
        "resources": {"limits": {"hami.io/gpu": 1, "hami.io/gpumem": 100, "hami.io/gpucores": 5}},
    }
    assert container_request(config, container) == R(1, 100, PERCENT_UNSET, 5)
    assert container_request(config, limits(gpu=1)) is None


def test_empty_resource_names_match_nothing() -> None:
    config = NvidiaConfig(
        resource_count_name="",
        resource_memory_name="",
        resource_memory_percentage_name="",
        resource_core_name="",
    )
    assert container_request(config, limits(gpu=1, mem=1)) is None
    config = NvidiaConfig(resource_memory_name="", resource_memory_percentage_name="", resource_core_name="")
    assert container_request(config, limits(gpu=1, mem=1, pct=5, cores=5)) == R(1, 0, 100, 0)
