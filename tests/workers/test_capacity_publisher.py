"""workers/capacity.py against the API emulator (in process): what the leader writes to the nodes' capacity
annotation, and when it does not write — an unchanged value, a write whose echo the informer has not shown
yet, a replica that stopped leading."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from app.core.capacity import CAPACITY_ANNOTATION
from app.core.model import DeviceInfo, DeviceUse, NodeDevices
from app.k8s import objects
from app.k8s.client import Kube
from app.state.ledger import Entry, Ledger
from app.state.snapshot import NodeRecord, Snapshot
from config.settings import load_settings
from sim.emulator.testing import EmulatorHandle, node, run_emulator
from workers.capacity import ECHO_WAIT, CapacityPublisher

NODES = ("n0", "n1")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        handle.seed([node(name) for name in (*NODES, "cpu")])
        yield handle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def snapshot(*names: str) -> Snapshot:
    records = {}
    for name in names:
        gpu = DeviceInfo(f"GPU-{name}", 0, 10, 16384, 100, "NVIDIA-T4", 0, "hami-core", True, "NVIDIA")
        records[name] = NodeRecord(NodeDevices(name, (gpu,)), 1, "", "")
    return Snapshot(1, records, {}, {}, 0.0)


def publisher(
    tmp_path: Path, kube: Kube, clock: Clock, *, on: bool = True
) -> tuple[CapacityPublisher, CollectorRegistry]:
    env = {"HAMI_STATE_DIR": str(tmp_path / "state"), "HAMI_PUBLISH_CAPACITY": str(on).lower()}
    registry = CollectorRegistry()
    patches = Counter("patches", "PATCHes", ["result"], registry=registry)
    return CapacityPublisher(kube, load_settings(env), clock, patches), registry


def nodes(kube: Kube) -> list[dict[str, Any]]:
    return [objects.get_node(kube, name) for name in (*NODES, "cpu")]


def published(kube: Kube, name: str) -> dict[str, int] | None:
    value = objects.annotations_of(objects.get_node(kube, name)).get(CAPACITY_ANNOTATION)
    return json.loads(value)["vendors"]["NVIDIA"] if value is not None else None


def figures(memory_free: int, cores_free: int) -> dict[str, int]:
    """One T4 of 16384 MiB and 100 cores (`snapshot`)."""
    free = {"memoryFree": memory_free, "coresFree": cores_free}
    return {"devices": 1, "devicesFree": 1, "memory": 16384, "cores": 100, **free}


def count(registry: CollectorRegistry, result: str) -> float:
    return registry.get_sample_value("patches_total", {"result": result}) or 0.0


def test_writes_once_per_change_and_waits_for_the_echo(tmp_path: Path, kube: Kube) -> None:
    clock = Clock()
    cap, registry = publisher(tmp_path, kube, clock)
    try:
        stale = nodes(kube)  # what a lagging informer still shows after the writes below
        assert cap.step(snapshot(*NODES), stale, lambda: True) == 2
        assert published(kube, "n0") == figures(16384, 100)
        assert published(kube, "cpu") is None
        assert cap.step(snapshot(*NODES), stale, lambda: True) == 0, "the echo is on its way"
        assert cap.step(snapshot(*NODES), nodes(kube), lambda: True) == 0, "the informer shows it"

        ledger = Ledger(tmp_path / "state")
        try:
            use = DeviceUse(slots=1, mem=4096, cores=25)
            ledger.upsert([Entry("uid-1", "default", "p", "n1", "bound", {"GPU-n1": use})])
        finally:
            ledger.close()
        assert cap.step(snapshot(*NODES), nodes(kube), lambda: True) == 1  # n1 only
        assert published(kube, "n1") == figures(12288, 75)

        objects.patch_node_annotations(kube, "n0", {CAPACITY_ANNOTATION: None})  # someone removed it
        current = nodes(kube)
        clock.now += ECHO_WAIT + 1  # the informer is believed again
        assert cap.step(snapshot(*NODES), current, lambda: True) == 1
        assert published(kube, "n0") is not None
        assert (count(registry, "ok"), count(registry, "error")) == (4, 0)
    finally:
        cap.close()


def test_a_replica_that_stopped_leading_writes_nothing(tmp_path: Path, kube: Kube) -> None:
    cap, registry = publisher(tmp_path, kube, Clock())
    try:
        assert cap.step(snapshot(*NODES), nodes(kube), lambda: False) == 0
        assert [published(kube, name) for name in NODES] == [None, None]
        assert count(registry, "ok") == 0
    finally:
        cap.close()


def test_a_node_gone_from_the_api_is_counted_not_raised(tmp_path: Path, kube: Kube) -> None:
    cap, registry = publisher(tmp_path, kube, Clock())
    try:
        assert cap.step(snapshot("n0", "gone"), nodes(kube), lambda: True) == 2
        assert (count(registry, "ok"), count(registry, "error")) == (1, 1)
    finally:
        cap.close()


def test_off_removes_what_it_finds_and_nothing_else(tmp_path: Path, kube: Kube) -> None:
    objects.patch_node_annotations(kube, "n1", {CAPACITY_ANNOTATION: '{"version":1,"vendors":{}}'})
    cap, _ = publisher(tmp_path, kube, Clock(), on=False)
    try:
        assert cap.step(snapshot(*NODES), nodes(kube), lambda: True) == 1
        assert [published(kube, name) for name in (*NODES, "cpu")] == [None, None, None]
        assert cap.step(snapshot(*NODES), nodes(kube), lambda: True) == 0
    finally:
        cap.close()
