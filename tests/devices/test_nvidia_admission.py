"""NVIDIA `MutateAdmission`: what the webhook changes in one container (reference §6.2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.core.vendor import AdmissionError
from app.devices.nvidia import NvidiaConfig
from app.devices.nvidia.admission import mutate_container

DEFAULT = NvidiaConfig()
GPU, MEM, PCT, CORES, PRIO = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
    "nvidia.com/priority",
)


def container(
    limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": "c", "resources": resources, **extra}


def mutate(
    ctr: dict[str, Any], config: NvidiaConfig = DEFAULT, pod: dict[str, Any] | None = None
) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    ctr = copy.deepcopy(ctr)
    the_pod = copy.deepcopy(pod) if pod is not None else {"spec": {}}
    result = mutate_container(config, ctr, the_pod)
    return result, ctr, the_pod


@pytest.mark.parametrize(
    ("ctr", "config", "has_resource", "limits", "requests"),
    [
        (container({GPU: "1"}), DEFAULT, True, {GPU: "1", CORES: "100"}, None),
        (container({MEM: "4000"}), DEFAULT, True, {MEM: "4000", GPU: "1"}, None),
        (container({CORES: "30"}), DEFAULT, True, {CORES: "30", GPU: "1"}, None),
        (container({PCT: "100"}), DEFAULT, True, {PCT: "100", GPU: "1", CORES: "100"}, None),
        (container({PCT: "50"}), NvidiaConfig(default_gpu_num=2), True, {PCT: "50", GPU: "2"}, None),
        (container({MEM: "4000"}), NvidiaConfig(default_gpu_num=0), False, {MEM: "4000"}, None),
        (container({GPU: "1", MEM: "4000"}), DEFAULT, True, {GPU: "1", MEM: "4000"}, None),
        (container({GPU: "1"}, {MEM: "4000"}), DEFAULT, True, {GPU: "1"}, {MEM: "4000"}),
        (container({GPU: "1", PCT: "100"}), DEFAULT, True, {GPU: "1", PCT: "100", CORES: "100"}, None),
        (container({GPU: "1", PCT: "99.5"}), DEFAULT, True, {GPU: "1", PCT: "99.5", CORES: "100"}, None),
        (container({GPU: "1", PCT: "50"}), DEFAULT, True, {GPU: "1", PCT: "50"}, None),
        (container({GPU: "1", PCT: "0"}), DEFAULT, True, {GPU: "1", PCT: "0"}, None),
        (container({GPU: "1", CORES: "0"}), DEFAULT, True, {GPU: "1", CORES: "0"}, None),
        (container({GPU: "1"}, {CORES: "20"}), DEFAULT, True, {GPU: "1"}, {CORES: "20"}),
        (container(None, {GPU: "1"}), DEFAULT, True, {CORES: "100"}, {GPU: "1"}),
        (container(None, {GPU: "1", MEM: "10"}), DEFAULT, False, None, {GPU: "1", MEM: "10"}),
        (container({GPU: "1"}), NvidiaConfig(resource_memory_name=""), True, {GPU: "1", CORES: "100"}, None),
        (
            container({GPU: "1", MEM: "1"}),
            NvidiaConfig(resource_memory_name=""),
            True,
            {GPU: "1", MEM: "1", CORES: "100"},
            None,
        ),
        (container({}), DEFAULT, False, {}, None),
        (container(), DEFAULT, False, None, None),
        (container({"cpu": "1"}), DEFAULT, False, {"cpu": "1"}, None),
    ],
    ids=[
        "count-only-becomes-exclusive",
        "memory-only-adds-default-count",
        "cores-only-adds-default-count",
        "percentage-100-adds-count-and-cores",
        "default-gpu-num-2",
        "default-gpu-num-0-no-count",
        "count-and-memory-shared",
        "memory-in-requests-still-shared",
        "percentage-100-exclusive",
        "percentage-rounds-to-100",
        "percentage-50-shared",
        "percentage-0-shared",
        "explicit-zero-cores-kept",
        "cores-in-requests-count-as-present",
        "count-in-requests-exclusive-path",
        "count-in-requests-with-memory-not-detected",
        "memory-name-unconfigured-exclusive",
        "memory-name-unconfigured-ignores-memory",
        "empty-limits",
        "no-resources",
        "cpu-only",
    ],
)
def test_resources(
    ctr: dict[str, Any], config: NvidiaConfig, has_resource: bool, limits: Any, requests: Any
) -> None:
    result, mutated, _pod = mutate(ctr, config)
    assert result is has_resource
    assert mutated["resources"].get("limits") == limits
    assert mutated["resources"].get("requests") == requests


@pytest.mark.parametrize(
    ("ctr", "value"),
    [
        (container({GPU: "1", PCT: "101"}), "101"),
        (container({GPU: "1", PCT: "-1"}), "-1"),
        (container({GPU: "1", PCT: "-0.5"}), "-0.5"),
        (container({GPU: "1", PCT: "100.5"}), "100.5"),
        (container({GPU: "1"}, {PCT: "150"}), "150"),
        (container({PCT: "200"}), "200"),
    ],
    ids=[
        "101",
        "negative",
        "negative-fraction-rounds-away-from-zero",
        "fraction-over-100",
        "in-requests",
        "without-count",
    ],
)
def test_invalid_percentage_is_an_error(ctr: dict[str, Any], value: str) -> None:
    with pytest.raises(AdmissionError) as info:
        mutate(ctr)
    assert str(info.value) == (
        f"invalid nvidia.com/gpumem-percentage value {value} in container c: "
        "must be an integer between 0 and 100"
    )


def test_percentage_in_limits_wins_over_requests() -> None:
    result, _, _ = mutate(container({GPU: "1", PCT: "50"}, {PCT: "500"}))
    assert result is True


@pytest.mark.parametrize(
    ("ctr", "config", "env"),
    [
        (container({GPU: "1", PRIO: "1"}), DEFAULT, [{"name": "CUDA_TASK_PRIORITY", "value": "1"}]),
        (container({GPU: "1"}, {PRIO: "1"}), DEFAULT, None),
        (
            container({GPU: "1"}),
            NvidiaConfig(gpu_core_policy="force"),
            [{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"}],
        ),
        (
            container({"cpu": "1"}),
            NvidiaConfig(gpu_core_policy="disable"),
            [{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "disable"}],
        ),
        (container({GPU: "1"}), NvidiaConfig(gpu_core_policy="default"), None),
        (
            container({"cpu": "1"}),
            NvidiaConfig(overwrite_env=True),
            [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}],
        ),
        (container({GPU: "1"}), NvidiaConfig(overwrite_env=True), None),
        (
            container({"cpu": "1"}, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
            NvidiaConfig(overwrite_env=True, gpu_core_policy="force"),
            [
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"},
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"},
            ],
        ),
        (
            container({GPU: "1", PRIO: "0"}),
            NvidiaConfig(gpu_core_policy="force"),
            [
                {"name": "CUDA_TASK_PRIORITY", "value": "0"},
                {"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"},
            ],
        ),
    ],
    ids=[
        "priority-from-limits",
        "priority-in-requests-ignored",
        "core-policy-on-gpu-container",
        "core-policy-on-every-container",
        "default-core-policy-adds-nothing",
        "overwrite-env-on-non-gpu-container",
        "overwrite-env-not-on-gpu-container",
        "env-appended-not-deduplicated",
        "priority-then-policy",
    ],
)
def test_env(ctr: dict[str, Any], config: NvidiaConfig, env: Any) -> None:
    _, mutated, _ = mutate(ctr, config)
    assert mutated.get("env") == env


@pytest.mark.parametrize(
    ("ctr", "pod", "expected"),
    [
        (container({GPU: "1"}), {"spec": {}}, "nvidia"),
        (container({GPU: "1"}), {"spec": {"runtimeClassName": "kata"}}, "kata"),
        (container({"cpu": "1"}), {"spec": {}}, None),
    ],
    ids=["set-for-gpu-pods", "existing-kept", "not-for-non-gpu"],
)
def test_runtime_class(ctr: dict[str, Any], pod: dict[str, Any], expected: str | None) -> None:
    _, _, mutated_pod = mutate(ctr, NvidiaConfig(runtime_class_name="nvidia"), pod)
    assert mutated_pod["spec"].get("runtimeClassName") == expected


def test_no_runtime_class_configured() -> None:
    _, _, mutated_pod = mutate(container({GPU: "1"}), DEFAULT, {"spec": {}})
    assert "runtimeClassName" not in mutated_pod["spec"]
