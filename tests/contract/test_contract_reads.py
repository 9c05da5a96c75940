"""Reads against both control planes: watch from a resourceVersion, 410 Gone, bookmarks, list paging, field
and label selectors."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sim.kit.kube import Kube

pytestmark = pytest.mark.integration


def pod(name: str, namespace: str, node: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def collect(
    api: Kube, path: str, version: str, timeout: int, count: int, **params: Any
) -> list[dict[str, Any]]:
    """Watch events (bookmarks included) until `count` arrived or the server ends the watch."""
    stop, events = threading.Event(), []
    for event in api.watch(path, version, stop, timeout_seconds=timeout, **params):
        events.append(event)
        if len(events) >= count:
            stop.set()
    return events


def test_a_watch_from_a_resource_version_replays_what_followed_it(api: Kube, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    created = api.create(path, pod("watched", ns))
    api.patch(f"{path}/watched", {"metadata": {"labels": {"k": "changed"}}})
    api.delete(f"{path}/watched", grace=0)
    events = collect(api, path, created["metadata"]["resourceVersion"], 5, 3)
    changes = [e for e in events if e["type"] != "BOOKMARK"]
    # A pod's deletion is two writes even at grace 0: deletionTimestamp (MODIFIED), then DELETED.
    assert [e["type"] for e in changes] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert changes[0]["object"]["metadata"]["labels"] == {"k": "changed"}
    assert "deletionTimestamp" not in changes[0]["object"]["metadata"]
    assert changes[1]["object"]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert changes[2]["object"]["metadata"]["deletionTimestamp"]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in changes]
    assert versions == sorted(versions) and versions[0] > int(created["metadata"]["resourceVersion"])


def test_bookmarks_carry_a_newer_resource_version_to_resume_from(api: Kube, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    version, _ = api.list(path)
    elsewhere = threading.Timer(
        1.0, lambda: api.create("/api/v1/namespaces/default/pods", pod(ns, "default"))
    )
    elsewhere.start()
    try:
        # kube-apiserver sends a bookmark 2 s before the watch's timeout (and every minute), only once its
        # version moved past the watcher's; the emulator every --bookmark-interval.
        events = collect(api, path, version, 6, 1)
    finally:
        elsewhere.join()
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, events
    assert int(bookmarks[0]["object"]["metadata"]["resourceVersion"]) > int(version)
    assert bookmarks[0]["object"]["kind"] == "Pod"


def test_list_pages_follow_continue_tokens_over_one_snapshot(api: Kube, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    for index in range(7):
        api.create(path, pod(f"page-{index}", ns))
    first = api.request("GET", path, params={"limit": 3})
    assert len(first["items"]) == 3 and first["metadata"]["continue"]
    assert first["metadata"]["remainingItemCount"] == 4
    api.create(path, pod("page-late", ns))  # after the snapshot: not in the pages
    names = [i["metadata"]["name"] for i in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = api.request("GET", path, params={"limit": 3, "continue": token})
        assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert names == [f"page-{i}" for i in range(7)]


def test_a_malformed_continue_token_is_400(api: Kube, ns: str) -> None:
    params = {"limit": 2, "continue": "bogus"}
    status, body = api.exchange("GET", f"/api/v1/namespaces/{ns}/pods", **params)
    assert status == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=node-a", {"on-a", "on-a-2"}),
        ("spec.nodeName!=node-a", {"on-b", "unbound"}),
        ("spec.nodeName=", {"unbound"}),
        ("metadata.name=on-b", {"on-b"}),
        ("spec.nodeName=node-a,metadata.name!=on-a", {"on-a-2"}),
    ],
    ids=["equals", "not-equals", "empty-is-unbound", "name", "conjunction"],
)
def test_field_selectors_on_pods(api: Kube, ns: str, selector: str, expected: set[str]) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    for name, node in (("on-a", "node-a"), ("on-a-2", "node-a"), ("on-b", "node-b"), ("unbound", "")):
        api.create(path, pod(name, ns, node))
    assert {p["metadata"]["name"] for p in api.list(path, fieldSelector=selector)[1]} == expected


def test_an_unsupported_field_selector_is_400(api: Kube, ns: str) -> None:
    status, body = api.exchange("GET", f"/api/v1/namespaces/{ns}/pods", fieldSelector="spec.hostname=x")
    assert status == 400 and body["reason"] == "BadRequest"
    assert "field label not supported: spec.hostname" in body["message"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("tier=gpu", {"a"}),
        ("tier!=gpu", {"b", "c"}),
        ("tier in (gpu,cpu)", {"a", "b"}),
        ("tier notin (gpu)", {"b", "c"}),
        ("tier", {"a", "b"}),
        ("!tier", {"c"}),
        ("tier,team=ml", {"a"}),
    ],
    ids=["equals", "not-equals", "in", "notin", "exists", "not-exists", "conjunction"],
)
def test_label_selectors(api: Kube, ns: str, selector: str, expected: set[str]) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    labels = {"a": {"tier": "gpu", "team": "ml"}, "b": {"tier": "cpu"}, "c": {"team": "ml"}}
    for name, value in labels.items():
        api.create(path, pod(name, ns, labels=value))
    assert {c["metadata"]["name"] for c in api.list(path, labelSelector=selector)[1]} == expected


def test_a_malformed_label_selector_is_400(api: Kube, ns: str) -> None:
    status, body = api.exchange("GET", f"/api/v1/namespaces/{ns}/pods", labelSelector="tier in (gpu")
    assert status == 400 and body["reason"] == "BadRequest"


def test_an_object_leaving_a_watched_selector_is_deleted_with_its_previous_state(api: Kube, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods"
    created = api.create(path, pod("leaving", ns, labels={"phase": "one"}))
    moved = api.patch(f"{path}/leaving", {"metadata": {"labels": {"phase": "two"}}})
    events = collect(api, path, created["metadata"]["resourceVersion"], 4, 1, labelSelector="phase=one")
    changes = [e for e in events if e["type"] != "BOOKMARK"]
    assert [e["type"] for e in changes] == ["DELETED"]
    assert changes[0]["object"]["metadata"]["labels"] == {"phase": "one"}  # the state that matched ...
    assert changes[0]["object"]["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]
