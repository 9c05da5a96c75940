"""Watch semantics through the real client's ``watch.Watch().stream`` and over raw HTTP."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from sim.emulator.errors import ApiError
from sim.emulator.resources import NODES
from sim.emulator.selectors import FieldSelector, LabelSelector
from sim.emulator.store import Store
from sim.emulator.testing import EmulatorHandle, EmulatorOptions, node, pod, run_emulator, wait_for
from sim.emulator.watch import Watcher


def _events(stream: Any) -> list[tuple[str, str]]:
    return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in stream]


def test_watch_from_a_list_version_sees_only_later_changes(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    sim.seed([node("n1"), node("n2")])
    listed = core.list_node()
    core.patch_node("n1", {"metadata": {"labels": {"x": "1"}}})
    core.delete_node("n2")
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n3")))
    stream = watch.Watch().stream(
        core.list_node, resource_version=listed.metadata.resource_version, timeout_seconds=1
    )
    events = list(stream)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("MODIFIED", "n1"),
        ("DELETED", "n2"),
        ("ADDED", "n3"),
    ]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions) and versions[0] > int(listed.metadata.resource_version)


def test_watch_without_version_starts_with_current_objects_then_live(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    sim.seed([node("n1"), node("n2")])
    seen: list[tuple[str, str]] = []
    for event in watch.Watch().stream(core.list_node, timeout_seconds=2):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            core.patch_node("n2", {"metadata": {"labels": {"live": "yes"}}})
        if len(seen) == 3:
            break
    assert sorted(seen[:2]) == [("ADDED", "n1"), ("ADDED", "n2")]
    assert seen[2] == ("MODIFIED", "n2")


def test_watch_from_a_version_older_than_the_window_is_410(tmp_path: Path) -> None:
    with run_emulator(tmp_path, options=EmulatorOptions(event_window=5)) as sim, sim.api_client() as api:
        core = client.CoreV1Api(api)
        first = core.create_node(
            client.V1Node(metadata=client.V1ObjectMeta(name="n0"))
        ).metadata.resource_version
        for i in range(6):
            core.patch_node("n0", {"metadata": {"labels": {"i": str(i)}}})
        raw = sim.call("GET", "/api/v1/nodes", watch="true", resourceVersion=first)
        assert (
            raw["type"] == "ERROR" and raw["object"]["code"] == 410 and raw["object"]["reason"] == "Expired"
        )
        with pytest.raises(ApiException) as with_timeout:
            list(watch.Watch().stream(core.list_node, resource_version=first, timeout_seconds=5))
        assert with_timeout.value.status == 410

        # a watch is logged when its stream ends on the server, which may be just after the client raised
        def watches() -> list[dict[str, Any]]:
            return [r for r in sim.requests() if r["verb"] == "watch"]

        wait_for(lambda: len(watches()) >= 2, 10, "the two watches so far in the log")
        sim.clear_requests()
        with pytest.raises(ApiException) as without_timeout:
            list(watch.Watch().stream(core.list_node, resource_version=first))
        assert without_timeout.value.status == 410
        wait_for(lambda: len(watches()) >= 2, 10, "both watch requests in the log")
        time.sleep(0.2)  # a third one, were there any, would be logged by now
        assert len(watches()) == 2, "without timeout_seconds the client retries once after 410, then raises"


def test_label_selector_watch_sees_objects_enter_and_leave(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    sim.seed([node("n1"), node("n2")])
    rv = core.list_node().metadata.resource_version
    core.patch_node("n1", {"metadata": {"labels": {"role": "gpu"}}})
    core.patch_node("n2", {"metadata": {"labels": {"role": "cpu"}}})
    core.patch_node("n1", {"metadata": {"annotations": {"a": "1"}}})
    core.patch_node("n1", {"metadata": {"labels": {"role": "cpu"}}})
    stream = watch.Watch().stream(
        core.list_node, label_selector="role=gpu", resource_version=rv, timeout_seconds=1
    )
    events = [(e["type"], e["object"].metadata.name, e["object"].metadata.labels) for e in stream]
    assert events == [
        ("ADDED", "n1", {"role": "gpu"}),
        ("MODIFIED", "n1", {"role": "gpu"}),
        ("DELETED", "n1", {"role": "gpu"}),  # the last state that matched, at the change's version
    ]


def test_unassigned_pod_watch_sees_the_pod_leave_when_bound(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    sim.seed([pod("p1"), pod("p2")])
    rv = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=").metadata.resource_version
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p1"), target=client.V1ObjectReference(name="n1")
    )
    core.create_namespaced_pod_binding("p1", "default", body, _preload_content=False)
    stream = watch.Watch().stream(
        core.list_pod_for_all_namespaces,
        field_selector="spec.nodeName=",
        resource_version=rv,
        timeout_seconds=1,
    )
    events = [(e["type"], e["object"].metadata.name) for e in stream]
    assert events == [("DELETED", "p1")]


def test_namespaced_watch_filters_other_namespaces(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("a", namespace="x"), pod("b", namespace="y")])
    assert _events(watch.Watch().stream(core.list_namespaced_pod, "x", timeout_seconds=1)) == [("ADDED", "a")]


def test_bookmarks_carry_the_current_version(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([node("n1")])
    rv = core.list_node().metadata.resource_version
    sim.seed([pod("unrelated")])  # moves the global version without a node event
    watcher = watch.Watch()
    events = list(
        watcher.stream(core.list_node, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=1)
    )
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks and all(set(e["raw_object"]) == {"kind", "apiVersion", "metadata"} for e in bookmarks)
    assert bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"] == sim.stats()["resourceVersion"]
    assert watcher.resource_version == sim.stats()["resourceVersion"]


def test_timeout_seconds_ends_the_stream(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    started = time.monotonic()
    assert list(watch.Watch().stream(core.list_node, timeout_seconds=1)) == []
    assert 0.8 < time.monotonic() - started < 5
    assert sim.stats()["watchers"] == 0, "the watcher is unregistered"


def test_send_initial_events_ends_with_the_marker_bookmark(sim: EmulatorHandle) -> None:
    sim.seed([node("n1"), node("n2")])
    rv = sim.stats()["resourceVersion"]
    http = urllib3.PoolManager(retries=False)
    try:
        query = "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
        response = http.request("GET", f"{sim.url}/api/v1/nodes?{query}&timeoutSeconds=1")
        lines = [orjson.loads(line) for line in response.data.splitlines() if line]
    finally:
        http.clear()
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in lines[:3]] == [
        ("ADDED", "n1"),
        ("ADDED", "n2"),
        ("BOOKMARK", None),
    ]
    marker = lines[2]["object"]["metadata"]
    assert marker == {"resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}


def test_store_window_arithmetic() -> None:
    store = Store(window=3)
    watcher = Watcher(NODES, None, LabelSelector(), FieldSelector())
    with store.lock:
        entry = store.put(NODES, {"metadata": {"name": "n"}}, None)
        for i in range(4):
            entry = store.put(NODES, {"metadata": {"name": "n", "labels": {"i": str(i)}}}, entry)
    assert store.rv == 5
    with pytest.raises(ApiError) as caught:
        store.subscribe(NODES, None, 1, watcher)
    assert caught.value.code == 410
    rv, backlog = store.subscribe(NODES, None, 2, watcher)
    assert rv == 5 and [c.rv for c in backlog] == [3, 4, 5]


def test_a_watcher_that_falls_too_far_behind_is_closed() -> None:
    store = Store(window=10)
    watcher = Watcher(NODES, None, LabelSelector(), FieldSelector(), max_pending=2)
    store.subscribe(NODES, None, None, watcher)
    with store.lock:
        for i in range(3):
            store.put(NODES, {"metadata": {"name": f"n{i}"}}, None)
    assert watcher.take(0) is None
