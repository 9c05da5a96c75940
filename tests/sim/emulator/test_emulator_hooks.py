"""The /_sim/ test hooks: bulk seeding, store reads and deletes, stats and reset."""

from __future__ import annotations

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from sim.emulator.testing import EmulatorHandle, HookError, node, pod


def test_seed_keeps_status_and_identity_and_assigns_versions(sim: EmulatorHandle) -> None:
    given = pod("p", node_name="n1", phase="Running")
    given["metadata"]["uid"] = "fixed-uid"  # type: ignore[index]
    rv = sim.seed([node("n1"), given, {**pod(""), "metadata": {"generateName": "gen-", "namespace": "ns"}}])
    stored = sim.get("pods", "p", "default")
    assert stored is not None and stored["status"] == {"phase": "Running"}, "seeding is storage-level"
    assert stored["metadata"]["uid"] == "fixed-uid" and int(stored["metadata"]["resourceVersion"]) <= int(rv)
    generated = sim.list("pods", namespace="ns")
    assert len(generated) == 1 and generated[0]["metadata"]["name"].startswith("gen-")
    assert sim.get("namespaces", "ns") is not None, "namespaces are created implicitly"


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param([node("new"), node("dup")], id="duplicate-of-stored"),
        pytest.param([node("new"), node("new")], id="duplicate-within-batch"),
        pytest.param(
            [node("new"), {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}],
            id="unknown-kind",
        ),
        pytest.param([node("new"), {"apiVersion": "v1", "kind": "Node", "metadata": {}}], id="no-name"),
    ],
)
def test_seed_is_all_or_nothing(sim: EmulatorHandle, objects: list[dict[str, object]]) -> None:
    sim.seed([node("dup")])
    with pytest.raises(HookError) as caught:
        sim.seed(objects)
    assert caught.value.status in (400, 409, 422)
    assert sim.get("nodes", "new") is None


def test_store_reads_and_deletes(sim: EmulatorHandle) -> None:
    sim.seed([pod("a", labels={"x": "1"}, node_name="n1", phase="Running"), pod("b", namespace="other")])
    assert [p["metadata"]["name"] for p in sim.list("pods", label_selector="x=1")] == ["a"]
    assert [p["metadata"]["name"] for p in sim.list("pods", field_selector="metadata.namespace=other")] == [
        "b"
    ]
    assert sim.get("pods", "a") is not None and sim.get("pods", "a", "other") is None
    assert sim.delete("pods", "a") and not sim.delete("pods", "a"), "store deletes are immediate"
    with pytest.raises(HookError) as caught:
        sim.list("deployments")
    assert caught.value.status == 400


def test_stats_count_objects_and_watchers(sim: EmulatorHandle) -> None:
    sim.seed([node("n1"), pod("p")])
    stats = sim.stats()
    assert stats["objects"]["nodes"] == 1 and stats["objects"]["pods"] == 1
    assert stats["objects"]["namespaces"] == 4 and stats["watchers"] == 0


def test_reset_empties_everything_but_versions_keep_growing(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    sim.seed([node("n1")])
    before = core.list_node().metadata.resource_version
    sim.add_fault(action="delay", delay=0.01, verb="get")
    sim.reset()
    assert sim.list("nodes") == [] and sim.faults()["rules"] == [] and sim.faults_injected() == 0
    assert sim.requests() == []
    assert sorted(n["metadata"]["name"] for n in sim.list("namespaces")) == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]
    after = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n2"))).metadata.resource_version
    assert int(after) > int(before)
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(core.list_node, resource_version=before, timeout_seconds=1))
    assert caught.value.status == 410, "history before a reset is gone"


def test_unknown_hook_is_404(sim: EmulatorHandle) -> None:
    with pytest.raises(HookError) as caught:
        sim.call("GET", "/_sim/nothing")
    assert caught.value.status == 404
