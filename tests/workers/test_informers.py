"""Informers against the API emulator (in this process, real HTTP, the real kubernetes client)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from worker_builders import VENDORS, cpu_node, gpu_node

from app.k8s.client import Kube
from app.k8s.watching import Expired, Target, WatchStream, list_objects
from sim.emulator.testing import EmulatorHandle, EmulatorOptions, run_emulator
from workers import shapes
from workers.informers import ADDED, DELETED, MODIFIED, Backoff, Change, Informer, by_name

SHAPE = shapes.node_shape(VENDORS)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    options = EmulatorOptions(event_window=50, pod_deletion_delay=0.0, bookmark_interval=0.2)
    with run_emulator(tmp_path / "sim", options=options) as handle:
        yield handle


def until(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.lock = threading.Lock()
        self.fail = 0

    def __call__(self, changes: Sequence[Change]) -> None:
        with self.lock:
            if self.fail:
                self.fail -= 1
                raise RuntimeError("handler failure")
            self.changes.extend(changes)

    def seen(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(c.type, c.obj["metadata"]["name"]) for c in self.changes]


def informer(kube: Kube, handler: Recorder, restarts: list[tuple[str, str]]) -> Informer:
    return Informer(
        kube,
        Target("nodes"),
        SHAPE,
        by_name,
        handler,
        on_restart=lambda resource, reason: restarts.append((resource, reason)),
        backoff=Backoff(first=0.05, cap=0.2),
    )


def test_list_pages_and_strips(sim: EmulatorHandle, kube: Kube) -> None:
    big = gpu_node("g1")
    big["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    big["metadata"]["annotations"]["hami.io/mutex.lock"] = "2026-01-01T00:00:00Z,default,p"
    big["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    sim.seed([big, cpu_node("c1"), cpu_node("c2")])
    pages: list[int] = []
    items, version = list_objects(kube, Target("nodes"), SHAPE, page_size=2, on_page=lambda: pages.append(1))
    assert len(items) == 3 and len(pages) == 2 and version
    g1 = next(i for i in items if i["metadata"]["name"] == "g1")
    assert "managedFields" not in g1["metadata"]
    assert set(g1["metadata"]["annotations"]) == {"hami.io/node-nvidia-register", "hami.io/mutex.lock"}
    assert g1["status"] == {"allocatable": {"nvidia.com/gpu": "2"}}


def test_watch_from_a_version_out_of_the_window_is_expired(sim: EmulatorHandle, kube: Kube) -> None:
    _, version = list_objects(kube, Target("nodes"), SHAPE)
    sim.seed([cpu_node(f"c{i}") for i in range(60)])
    with pytest.raises(Expired):
        list(WatchStream(kube, Target("nodes"), version, 5))


def test_relist_reports_what_changed_in_between(sim: EmulatorHandle, kube: Kube) -> None:
    sim.seed([cpu_node("a"), cpu_node("b")])
    handler, restarts = Recorder(), list[tuple[str, str]]()
    nodes = informer(kube, handler, restarts)
    nodes._relist()
    assert sorted(handler.seen()) == [(ADDED, "a"), (ADDED, "b")]
    assert nodes.synced.is_set()
    sim.delete("nodes", "b")
    sim.seed([cpu_node("c")])
    with sim.api_client() as api:
        client.CoreV1Api(api).patch_node(
            "a",
            {"metadata": {"labels": {shapes.ZONE_LABEL: "z"}}},
            _content_type="application/merge-patch+json",
        )
    handler.changes.clear()
    nodes._relist()
    assert sorted(handler.seen()) == [(ADDED, "c"), (DELETED, "b"), (MODIFIED, "a")]
    modified = next(c for c in handler.changes if c.type == MODIFIED)
    assert modified.old is not None and modified.old["metadata"]["labels"] == {}
    assert sorted(o["metadata"]["name"] for o in nodes.items()) == ["a", "c"]


def test_watch_survives_a_dropped_connection_and_a_410(sim: EmulatorHandle, kube: Kube) -> None:
    sim.seed([cpu_node("a")])
    sim.add_fault(action="drop_watch", after_events=0, resource="nodes", count=1)
    sim.add_fault(action="error", status=410, verb="watch", resource="nodes", count=1)
    handler, restarts = Recorder(), list[tuple[str, str]]()
    nodes = informer(kube, handler, restarts)
    nodes.start()
    try:
        until(nodes.synced.is_set)
        until(lambda: ("nodes", "expired") in restarts)
        assert ("nodes", "dropped") in restarts
        sim.seed([gpu_node("b")])
        until(lambda: (ADDED, "b") in handler.seen())
        sim.delete("nodes", "b")
        until(lambda: (DELETED, "b") in handler.seen())
        assert nodes.get("/b") is None and nodes.get("/a") is not None
    finally:
        nodes.stop()
        nodes.join(5)


def test_a_failing_handler_gets_the_change_again(sim: EmulatorHandle, kube: Kube) -> None:
    handler, restarts = Recorder(), list[tuple[str, str]]()
    nodes = informer(kube, handler, restarts)
    nodes.start()
    try:
        until(nodes.synced.is_set)
        handler.fail = 1
        sim.seed([cpu_node("x")])
        until(lambda: (ADDED, "x") in handler.seen())
        assert ("nodes", "handler") in restarts
    finally:
        nodes.stop()
        nodes.join(5)


def test_stop_ends_an_idle_watch_promptly(sim: EmulatorHandle, kube: Kube) -> None:
    handler, restarts = Recorder(), list[tuple[str, str]]()
    nodes = informer(kube, handler, restarts)
    nodes.start()
    until(nodes.synced.is_set)
    time.sleep(0.3)  # inside the watch now
    started = time.monotonic()
    nodes.stop()
    nodes.join(5)
    assert time.monotonic() - started < 5
    assert restarts == []
