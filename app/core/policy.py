"""GPU and node scheduling policies: how candidates are ordered (reference §4.5, §4.6).

Fit consumes the device list from its end and the winner node is the last of the sorted node list, so a
policy is just a sort order; "sorts last" means "tried first". HAMi's Go sort is unstable above 12
elements, which makes its ties random (quirk #9); we use Python's stable sort on the previous order, so ties
break by registration order for devices and by candidate order for nodes, deterministically
(docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.core.model import DeviceUsage

BINPACK = "binpack"
SPREAD = "spread"
MUTEX = "mutex"
NUMA = "numa"
TOPOLOGY = "topology-aware"

GPU_POLICY_ANNOTATION = "hami.io/gpu-scheduler-policy"
NODE_POLICY_ANNOTATION = "hami.io/node-scheduler-policy"
NUMA_BIND_ANNOTATION = "nvidia.com/numa-bind"


@dataclass(slots=True)
class ScoredDevice:
    """A device with its score for the container being placed (HAMi `DeviceListsScore`)."""

    device: DeviceUsage
    score: float = 0.0


GPU_POLICIES = (BINPACK, SPREAD, MUTEX, NUMA, TOPOLOGY)  # combinable, comma-separated (HAMi's chains)
NODE_POLICIES = (BINPACK, SPREAD)


def unknown_gpu_policy(policy: str) -> str | None:
    """The first entry of a GPU policy value that names no policy; None when every entry is known."""
    return next((p for p in policy_names(policy) if p not in GPU_POLICIES), None)


def policy_names(policy: str) -> list[str]:
    """The comma-separated entries of a policy value, trimmed."""
    return [part.strip() for part in policy.split(",")]


def policy_contains(policy: str, name: str) -> bool:
    return name in policy_names(policy)


def gpu_policy(annotations: Mapping[str, str], default: str) -> str:
    """The pod's `hami.io/gpu-scheduler-policy` (verbatim, may be a chain) or the default.

    Present means present, as in HAMi (`if value, ok := ...; ok`): an empty value overrides the default and
    sorts as spread (an unknown policy does too), an empty node policy as binpack.
    """
    return annotations.get(GPU_POLICY_ANNOTATION, default)


def node_policy(annotations: Mapping[str, str], default: str) -> str:
    return annotations.get(NODE_POLICY_ANNOTATION, default)


def go_parse_bool(text: str) -> bool | None:
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def numa_bind(annotations: Mapping[str, str]) -> bool:
    return go_parse_bool(annotations.get(NUMA_BIND_ANNOTATION, "")) is True


def _chain(policy: str, bind: bool) -> list[str]:
    keys: list[str] = []
    for name in policy_names(policy):
        if name in (BINPACK, SPREAD, NUMA) and name not in keys:
            keys.append(name)
    if not keys:
        keys = [SPREAD]
    if bind and keys[0] != NUMA:
        keys = [NUMA, *(k for k in keys if k != NUMA)]
    return keys


def device_sort_key(policy: str, bind: bool) -> Callable[[ScoredDevice], tuple[float, ...]]:
    """The ascending sort key equivalent to HAMi's `DeviceUsageList.Less` for this policy."""
    if "," in policy or policy == NUMA:
        keys = _chain(policy, bind)

        def chained(s: ScoredDevice) -> tuple[float, ...]:
            parts: list[float] = []
            for key in keys:
                if key == BINPACK:
                    parts.append(s.score)
                elif key == SPREAD:
                    parts.append(-s.score)
                else:
                    parts.append(s.device.numa)
            parts.append(s.device.index)
            return tuple(parts)

        return chained
    if policy == MUTEX:
        return lambda s: (-s.device.used, s.device.numa)
    binpack = policy == BINPACK
    if bind:
        if binpack:
            return lambda s: (-s.device.numa, s.score)
        return lambda s: (s.device.numa, -s.score)
    if binpack:
        return lambda s: (s.score, s.device.numa)
    return lambda s: (-s.score, s.device.numa)


def sort_devices(devices: list[ScoredDevice], policy: str, bind: bool) -> None:
    """Stable in-place sort; the previous order carries over between containers (quirk #10)."""
    devices.sort(key=device_sort_key(policy, bind))


def node_score_sign(policy: str) -> float:
    """-1 under spread (the emptiest node wins), +1 under binpack and anything else (the fullest wins)."""
    return -1.0 if policy == SPREAD else 1.0


def node_sort_key(policy: str) -> Callable[[float], float]:
    """Ascending key for node scores: binpack puts the fullest node last (the winner), spread the emptiest."""
    sign = node_score_sign(policy)
    return lambda score: sign * score
