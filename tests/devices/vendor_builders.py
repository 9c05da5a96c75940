"""Builders shared by the tests of the non-NVIDIA vendors (uniquely named: test folders are on sys.path)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.core.model import ContainerDevice, ContainerDevices, DeviceInfo, DeviceUsage, NodeDevices
from app.core.vendor import FitContext, NodeView


def dev(
    uuid: str = "D-0",
    index: int = 0,
    *,
    type: str = "DCU",
    vendor: str = "DCU",
    used: int = 0,
    count: int = 10,
    usedmem: int = 0,
    totalmem: int = 16384,
    usedcores: int = 0,
    totalcore: int = 100,
    health: bool = True,
    custom: Mapping[str, Any] | None = None,
    tags: tuple[str, ...] = (),
) -> DeviceUsage:
    return DeviceUsage(
        uuid,
        index,
        used,
        count,
        usedmem,
        totalmem,
        totalcore,
        usedcores,
        "hami-core",
        0,
        type,
        health,
        vendor=vendor,
        custom=dict(custom or {}),
        tags=tags,
    )


def info(
    uuid: str,
    index: int = 0,
    *,
    type: str = "DCU",
    vendor: str = "DCU",
    count: int = 10,
    mem: int = 16384,
    core: int = 100,
    health: bool = True,
    custom: Mapping[str, Any] | None = None,
) -> DeviceInfo:
    return DeviceInfo(
        uuid, index, count, mem, core, type, 0, "hami-core", health, vendor, custom=dict(custom or {})
    )


def fit_ctx(
    annotations: Mapping[str, str] | None = None,
    policy: str = "spread",
    *,
    node: NodeDevices | None = None,
    quota: Callable[[Sequence[ContainerDevice]], bool] | None = None,
    allocated: tuple[ContainerDevices, ...] = (),
) -> FitContext:
    return FitContext(
        dict(annotations or {}),
        "default",
        policy,
        node or NodeDevices("n1", ()),
        quota or (lambda _devices: True),
        allocated,
    )


def view(
    name: str = "n1",
    annotations: Mapping[str, str] | None = None,
    *,
    capacity: Mapping[str, Any] | None = None,
    allocatable: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> NodeView:
    return NodeView(
        name, dict(annotations or {}), dict(labels or {}), dict(capacity or {}), dict(allocatable or {})
    )


def res(
    name: str = "c", *, limits: Mapping[str, Any] | None = None, requests: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": name, "resources": resources}
