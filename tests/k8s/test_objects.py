"""The pod and node calls of app/k8s/objects.py, which go straight to the client's connection pool, against
the API emulator: the same requests and answers as the generated client methods, errors as ApiError."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from app.k8s import objects
from app.k8s.client import Kube, connect, user_agent
from app.k8s.errors import ApiError
from sim.emulator.testing import EmulatorHandle, node, pod, run_emulator


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[EmulatorHandle]:
    with run_emulator(tmp_path / "sim") as handle:
        handle.seed([pod("p1"), node("n1", annotations={"a": "1"})])
        yield handle


@pytest.fixture
def kube(sim: EmulatorHandle) -> Iterator[Kube]:
    connected = connect(str(sim.kubeconfig))
    yield connected
    connected.close()


def test_patch_read_and_bind_a_pod(sim: EmulatorHandle, kube: Kube) -> None:
    uid = objects.get_pod(kube, "default", "p1")["metadata"]["uid"]
    patched = objects.patch_pod_metadata(
        kube, "default", "p1", {"hami.io/vgpu-node": "n1", "gone": None}, {"hami.io/vgpu-node": "n1"}, uid=uid
    )
    assert patched["metadata"]["annotations"]["hami.io/vgpu-node"] == "n1"
    assert patched["metadata"]["labels"]["hami.io/vgpu-node"] == "n1"
    request = sim.requests()[-1]
    assert (request["method"], request["path"]) == ("PATCH", "/api/v1/namespaces/default/pods/p1")
    objects.bind_pod(kube, "default", "p1", uid, "n1")
    assert objects.get_pod(kube, "default", "p1")["spec"]["nodeName"] == "n1"


def test_node_patch_with_a_stale_resource_version_is_a_conflict(kube: Kube) -> None:
    current = objects.get_node(kube, "n1")
    version = objects.resource_version(current)
    objects.patch_node_annotations(kube, "n1", {"a": "2"}, resource_version=version)
    with pytest.raises(ApiError) as raised:
        objects.patch_node_annotations(kube, "n1", {"a": "3"}, resource_version=version)
    assert raised.value.conflict and raised.value.reason == "Conflict"
    assert objects.annotations_of(objects.get_node(kube, "n1"))["a"] == "2"


def test_errors_carry_the_servers_status(kube: Kube) -> None:
    with pytest.raises(ApiError) as raised:
        objects.get_pod(kube, "default", "missing")
    assert raised.value.not_found and raised.value.reason == "NotFound"
    assert "missing" in raised.value.message
    with pytest.raises(ApiError) as raised:
        objects.bind_pod(kube, "default", "missing", "", "n1")
    assert raised.value.status == 404


def test_no_answer_is_status_zero(tmp_path: Path) -> None:
    with run_emulator(tmp_path / "gone") as handle:
        kube = connect(str(handle.kubeconfig))
    try:
        with pytest.raises(ApiError) as raised:
            objects.get_pod(kube, "default", "p1")
        assert raised.value.status == 0 and raised.value.reason == "ConnectionError"
    finally:
        kube.close()


def test_each_process_says_who_it_is_in_its_user_agent(sim: EmulatorHandle) -> None:
    """The direct calls and the generated client's both carry it (the chaos storm aims faults with it)."""
    agent = user_agent("worker", "hami-scheduler-7")
    assert agent.startswith("hami-scheduler-worker/") and agent.endswith(" (hami-scheduler-7)")
    sim.add_fault(action="error", status=503, verb="get", user_agent=r"worker/\S+ \(hami-scheduler-7\)")
    plain = connect(str(sim.kubeconfig))
    named = connect(str(sim.kubeconfig), agent=agent)
    try:
        assert objects.get_pod(plain, "default", "p1")["metadata"]["name"] == "p1"
        with pytest.raises(ApiError) as direct:
            objects.get_pod(named, "default", "p1")
        with pytest.raises(ApiException) as generated:
            named.core.read_node("n1")
    finally:
        plain.close()
        named.close()
    assert direct.value.status == 503 and generated.value.status == 503
    assert sim.faults()["rules"][0]["fired"] == 2


def test_the_pods_on_a_node_are_listed_in_pages(sim: EmulatorHandle, kube: Kube) -> None:
    """/bind's re-check LIST goes through the raw call (issue 20): every page, only the node's pods."""
    sim.seed([pod(f"on-{i}", node_name="n1") for i in range(3)] + [pod("elsewhere", node_name="n2")])
    found = objects.pods_on_node(kube, "n1", page_size=2)
    assert sorted(p["metadata"]["name"] for p in found) == ["on-0", "on-1", "on-2"]
    lists = [r for r in sim.requests() if r["method"] == "GET" and r["path"] == "/api/v1/pods"]
    assert len(lists) == 2


def test_an_event_is_posted_in_the_pods_namespace(sim: EmulatorHandle, kube: Kube) -> None:
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "p1.", "namespace": "default"}}
    event |= {"involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"}, "reason": "R"}
    objects.create_event(kube, "default", event)
    posted = [e for e in sim.list("events", namespace="default") if e.get("reason") == "R"]
    assert len(posted) == 1 and posted[0]["metadata"]["name"].startswith("p1.")


def test_credentials_are_re_read_at_most_every_auth_ttl(kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's token-refresh hook runs at most once per AUTH_TTL and client (it re-applies the whole
    kubeconfig each time: issue 20); its token is what the requests carry."""
    runs: list[int] = []

    def refresh(configuration: object) -> None:
        runs.append(1)
        kube.api.configuration.api_key["BearerToken"] = f"token-{len(runs)}"

    kube.api.configuration.refresh_api_key_hook = refresh
    now = [1000.0]
    monkeypatch.setattr(objects, "_clock", lambda: now[0])
    first, lines = objects._headers(kube)
    assert objects._headers(kube)[0] is first and runs == [1]
    assert first["authorization"] == "token-1" and b"authorization: token-1\r\n" in lines
    now[0] += objects.AUTH_TTL
    assert objects._headers(kube)[0]["authorization"] == "token-2" and runs == [1, 1]
