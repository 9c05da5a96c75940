"""Reads and writes through the real ``kubernetes`` client: what our code relies on from kube-apiserver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.emulator.testing import EmulatorHandle, HookError, node, pod, wait_for


def _status(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    return body


def test_create_get_and_list_with_metadata(core: client.CoreV1Api) -> None:
    created = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1", labels={"gpu": "yes"})))
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    fetched = core.read_node("n1")
    assert fetched.metadata.resource_version == created.metadata.resource_version
    listed = core.list_node()
    assert [n.metadata.name for n in listed.items] == ["n1"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)


def test_every_write_gets_a_new_larger_resource_version(core: client.CoreV1Api) -> None:
    versions = [
        int(core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n"))).metadata.resource_version)
    ]
    for value in ("a", "b", "c"):
        patched = core.patch_node("n", {"metadata": {"annotations": {"k": value}}})
        versions.append(int(patched.metadata.resource_version))
    assert versions == sorted(set(versions))
    unchanged = core.patch_node("n", {"metadata": {"annotations": {"k": "c"}}})
    assert int(unchanged.metadata.resource_version) == versions[-1], "a no-op patch does not bump the version"


def test_generate_name_and_pod_defaults(core: client.CoreV1Api) -> None:
    body = client.V1Pod(
        metadata=client.V1ObjectMeta(generate_name="worker-"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]),
        status=client.V1PodStatus(phase="Running"),
    )
    created = core.create_namespaced_pod("team-a", body)
    assert created.metadata.name.startswith("worker-") and len(created.metadata.name) == len("worker-") + 5
    assert created.metadata.namespace == "team-a"
    assert created.status.phase == "Pending", "a created pod's status is reset, as on a real server"
    assert created.spec.scheduler_name == "default-scheduler"
    assert "team-a" in [ns.metadata.name for ns in core.list_namespace().items], "namespaces are implicit"


LIST_CASES = [
    pytest.param({"label_selector": "app=web"}, ["web-1", "web-2"], id="label-equal"),
    pytest.param({"label_selector": "app!=web"}, ["db-1", "idle"], id="label-not-equal"),
    pytest.param({"label_selector": "app in (db,cache)"}, ["db-1"], id="label-in"),
    pytest.param({"label_selector": "app"}, ["db-1", "web-1", "web-2"], id="label-exists"),
    pytest.param({"label_selector": "!app"}, ["idle"], id="label-not-exists"),
    pytest.param({"field_selector": "spec.nodeName=n1"}, ["db-1", "web-1"], id="field-node"),
    pytest.param({"field_selector": "spec.nodeName="}, ["idle"], id="field-unbound"),
    pytest.param({"field_selector": "status.phase=Running,spec.nodeName!=n1"}, ["web-2"], id="field-and"),
    pytest.param({"field_selector": "metadata.namespace=other"}, ["web-2"], id="field-namespace"),
    pytest.param(
        {"label_selector": "app=web", "field_selector": "metadata.name=web-1"}, ["web-1"], id="both"
    ),
]


@pytest.mark.parametrize(("selectors", "expected"), LIST_CASES)
def test_list_pods_with_selectors(
    sim: EmulatorHandle, core: client.CoreV1Api, selectors: dict[str, str], expected: list[str]
) -> None:
    sim.seed(
        [
            pod("web-1", node_name="n1", phase="Running", labels={"app": "web"}),
            pod("web-2", namespace="other", node_name="n2", phase="Running", labels={"app": "web"}),
            pod("db-1", node_name="n1", phase="Running", labels={"app": "db"}),
            pod("idle"),
        ]
    )
    found = core.list_pod_for_all_namespaces(**selectors)
    assert sorted(p.metadata.name for p in found.items) == expected


def test_namespaced_list_only_sees_its_namespace(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("a", namespace="x"), pod("b", namespace="y")])
    assert [p.metadata.name for p in core.list_namespaced_pod("x").items] == ["a"]


def test_bad_selector_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.list_node(field_selector="status.phase=Running")
    assert caught.value.status == 400 and _status(caught.value)["reason"] == "BadRequest"


def test_pagination_is_a_consistent_snapshot(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([node(f"n{i:02d}") for i in range(7)])
    first = core.list_node(limit=3)
    assert [n.metadata.name for n in first.items] == ["n00", "n01", "n02"]
    assert first.metadata.remaining_item_count == 4
    sim.seed([node("n03a")])
    core.delete_node("n05")
    names = [n.metadata.name for n in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_node(limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [n.metadata.name for n in page.items]
        token = page.metadata._continue
    assert names == [f"n{i:02d}" for i in range(7)], "later pages show the first page's snapshot"


def test_unknown_continue_token_is_410(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.list_node(limit=1, _continue="eyJydiI6MSwiaWQiOjk5OSwib2Zmc2V0IjoxfQ==")
    assert caught.value.status == 410 and _status(caught.value)["reason"] == "Expired"


def test_duplicate_create_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
    with pytest.raises(ApiException) as caught:
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
    status = _status(caught.value)
    assert caught.value.status == 409 and caught.value.reason == "Conflict"
    assert status["reason"] == "AlreadyExists" and status["details"] == {"name": "n1", "kind": "nodes"}
    assert status["message"] == 'nodes "n1" already exists'


def test_missing_object_is_404_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("nope", "default")
    status = _status(caught.value)
    assert (caught.value.status, status["reason"], status["message"]) == (
        404,
        "NotFound",
        'pods "nope" not found',
    )


def test_replace_with_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    original = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
    original.metadata.labels = {"first": "writer"}
    core.replace_node("n1", original)
    original.metadata.labels = {"second": "writer"}
    with pytest.raises(ApiException) as caught:
        core.replace_node("n1", original)
    assert caught.value.status == 409 and _status(caught.value)["reason"] == "Conflict"
    assert core.read_node("n1").metadata.labels == {"first": "writer"}


def test_replace_of_missing_object_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        core.replace_node("ghost", client.V1Node(metadata=client.V1ObjectMeta(name="ghost")))
    assert caught.value.status == 404


@pytest.mark.parametrize(
    ("content_type", "patch"),
    [
        pytest.param(
            "application/merge-patch+json",
            {"metadata": {"resourceVersion": "{rv}", "labels": {"x": "1"}}},
            id="merge",
        ),
        pytest.param(None, {"metadata": {"resourceVersion": "{rv}", "labels": {"x": "1"}}}, id="strategic"),
        pytest.param(
            "application/json-patch+json",
            [
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "{rv}"},
                {"op": "add", "path": "/metadata/labels", "value": {"x": "1"}},
            ],
            id="json",
        ),
    ],
)
def test_patch_carrying_a_stale_resource_version_is_409(
    core: client.CoreV1Api, content_type: str | None, patch: Any
) -> None:
    stale = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1"))).metadata.resource_version
    core.patch_node("n1", {"metadata": {"annotations": {"moved": "on"}}})
    body = json.loads(json.dumps(patch).replace("{rv}", stale))
    kwargs = {"_content_type": content_type} if content_type else {}
    with pytest.raises(ApiException) as caught:
        core.patch_node("n1", body, **kwargs)
    assert caught.value.status == 409 and _status(caught.value)["reason"] == "Conflict"
    current = core.read_node("n1").metadata.resource_version
    fresh = json.loads(json.dumps(patch).replace("{rv}", current))
    assert core.patch_node("n1", fresh, **kwargs).metadata.resource_version != current


def test_merge_patch_null_deletes(core: client.CoreV1Api) -> None:
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1", annotations={"a": "1", "b": "2"})))
    patched = core.patch_node(
        "n1",
        {"metadata": {"annotations": {"a": None, "c": "3"}}},
        _content_type="application/merge-patch+json",
    )
    assert patched.metadata.annotations == {"b": "2", "c": "3"}


def test_default_dict_patch_is_strategic_and_merges_containers(
    sim: EmulatorHandle, core: client.CoreV1Api
) -> None:
    sim.seed(
        [{**pod("p"), "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}]
    )
    patched = core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "b", "image": "3"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "1"), ("b", "3")]
    log = sim.requests()[-1]
    assert (log["verb"], log["resource"], log["status"]) == ("patch", "pods", 200)


def test_json_patch_with_failed_test_is_422(core: client.CoreV1Api) -> None:
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1", labels={"lock": "free"})))
    ok = [
        {"op": "test", "path": "/metadata/labels/lock", "value": "free"},
        {"op": "replace", "path": "/metadata/labels/lock", "value": "taken"},
    ]
    assert core.patch_node("n1", ok).metadata.labels == {"lock": "taken"}
    with pytest.raises(ApiException) as caught:
        core.patch_node("n1", ok)
    assert caught.value.status == 422 and _status(caught.value)["reason"] == "Invalid"


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        pytest.param({"metadata": {"name": "other"}}, 400, id="name"),
        pytest.param({"metadata": {"namespace": "other"}}, 400, id="namespace"),
        pytest.param({"metadata": {"uid": "0000"}}, 422, id="uid"),
    ],
)
def test_patch_cannot_change_identity(
    sim: EmulatorHandle, core: client.CoreV1Api, patch: dict[str, Any], code: int
) -> None:
    sim.seed([pod("p")])
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_pod("p", "default", patch, _content_type="application/merge-patch+json")
    assert caught.value.status == code
    assert sim.get("pods", "p", "default") is not None


def test_status_goes_through_the_status_subresource_only(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("p", node_name="n1")])
    ignored = core.patch_namespaced_pod(
        "p", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"l": "1"}}}
    )
    assert ignored.status.phase == "Pending" and ignored.metadata.labels == {"l": "1"}
    running = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"phase": "Running"}, "metadata": {"labels": {"l": "2"}}}
    )
    # metadata changes through /status too, as on kube-apiserver (tests/contract), the spec never does
    assert running.status.phase == "Running" and running.metadata.labels == {"l": "2"}
    running.status.phase = "Succeeded"
    assert core.replace_namespaced_pod_status("p", "default", running).status.phase == "Succeeded"


def _bind(core: client.CoreV1Api, name: str, node_name: str, uid: str | None = None) -> Any:
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, uid=uid, annotations={"bound-by": "test"}),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
    )
    return core.create_namespaced_pod_binding(name, "default", body, _preload_content=False)


def test_binding_sets_node_once(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("p")])
    response = _bind(core, "p", "n1")
    assert response.status == 201
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    bound = core.read_namespaced_pod("p", "default")
    assert bound.spec.node_name == "n1" and bound.metadata.annotations == {"bound-by": "test"}
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as caught:
        _bind(core, "p", "n2")
    assert caught.value.status == 409 and "is already assigned to node" in _status(caught.value)["message"]


def test_binding_errors(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as missing:
        _bind(core, "ghost", "n1")
    assert missing.value.status == 404
    sim.seed([pod("p")])
    with pytest.raises(ApiException) as wrong_uid:
        _bind(core, "p", "n1", uid="not-the-uid")
    assert wrong_uid.value.status == 409 and "Precondition failed" in _status(wrong_uid.value)["message"]
    uid = core.read_namespaced_pod("p", "default").metadata.uid
    assert _bind(core, "p", "n1", uid=uid).status == 201


def test_graceful_deletion_of_a_bound_pod(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("p", node_name="n1", phase="Running")])
    answer = core.delete_namespaced_pod("p", "default")
    assert (
        answer.metadata.deletion_timestamp is not None and answer.metadata.deletion_grace_period_seconds == 30
    )
    assert core.read_namespaced_pod("p", "default").metadata.deletion_timestamp is not None
    assert core.delete_namespaced_pod("p", "default").metadata.deletion_timestamp is not None, (
        "repeat is harmless"
    )
    wait_for(lambda: sim.get("pods", "p", "default") is None, 5, "the pod to go after the deletion delay")


@pytest.mark.parametrize(
    ("seeded", "kwargs"),
    [
        pytest.param(pod("p"), {}, id="unbound"),
        pytest.param(pod("p", node_name="n1", phase="Succeeded"), {}, id="terminated"),
        pytest.param(
            pod("p", node_name="n1", phase="Running"), {"grace_period_seconds": 0}, id="grace-0-query"
        ),
        pytest.param(
            pod("p", node_name="n1", phase="Running"),
            {"body": client.V1DeleteOptions(grace_period_seconds=0)},
            id="grace-0-body",
        ),
    ],
)
def test_immediate_pod_deletion(
    sim: EmulatorHandle, core: client.CoreV1Api, seeded: dict[str, Any], kwargs: dict[str, Any]
) -> None:
    sim.seed([seeded])
    core.delete_namespaced_pod("p", "default", **kwargs)
    assert sim.get("pods", "p", "default") is None


def test_delete_preconditions_and_status_answer(core: client.CoreV1Api) -> None:
    created = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
    with pytest.raises(ApiException) as caught:
        core.delete_node("n1", body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other")))
    assert caught.value.status == 409
    answer = core.delete_node(
        "n1", body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=created.metadata.uid))
    )
    assert answer["status"] == "Success", "delete_node answers a Status (a plain dict in client 37)"
    assert answer["details"] == {"name": "n1", "kind": "nodes", "uid": created.metadata.uid}
    with pytest.raises(ApiException) as gone:
        core.delete_node("n1")
    assert gone.value.status == 404


def test_delete_collection(sim: EmulatorHandle, core: client.CoreV1Api) -> None:
    sim.seed([pod("a", labels={"x": "1"}), pod("b", labels={"x": "1"}), pod("c")])
    core.delete_collection_namespaced_pod("default", label_selector="x=1")
    assert [p["metadata"]["name"] for p in sim.list("pods")] == ["c"]


def test_core_events(core: client.CoreV1Api) -> None:
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="p."),
        involved_object=client.V1ObjectReference(kind="Pod", name="p", namespace="default"),
        reason="FilteringFailed",
        message="no GPU fits",
        type="Warning",
    )
    created = core.create_namespaced_event("default", event)
    assert created.metadata.name.startswith("p.")
    found = core.list_namespaced_event(
        "default", field_selector="involvedObject.name=p,reason=FilteringFailed"
    )
    assert [e.message for e in found.items] == ["no GPU fits"]


def test_events_k8s_io_v1(api: client.ApiClient) -> None:
    import datetime

    events = client.EventsV1Api(api)
    body = client.EventsV1Event(
        metadata=client.V1ObjectMeta(generate_name="bind."),
        event_time=datetime.datetime.now(datetime.UTC),
        reporting_controller="hami-scheduler",
        reporting_instance="hami-0",
        action="Binding",
        reason="BindingSucceeded",
        regarding=client.V1ObjectReference(kind="Pod", name="p", namespace="default"),
        note="bound to n1",
        type="Normal",
    )
    created = events.create_namespaced_event("default", body)
    assert created.event_time is not None and created.note == "bound to n1"
    found = events.list_namespaced_event("default", field_selector="regarding.name=p")
    assert [e.metadata.name for e in found.items] == [created.metadata.name]


def test_resource_quotas_and_leases(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="gpu"),
        spec=client.V1ResourceQuotaSpec(hard={"limits.nvidia.com/gpu": "4"}),
    )
    core.create_namespaced_resource_quota("team", quota)
    assert core.read_namespaced_resource_quota("gpu", "team").spec.hard == {"limits.nvidia.com/gpu": "4"}
    leases = client.CoordinationV1Api(api)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(holder_identity="a")
    )
    created = leases.create_namespaced_lease("kube-system", lease)
    created.spec.holder_identity = "b"
    assert leases.replace_namespaced_lease("l", "kube-system", created).spec.holder_identity == "b"


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        pytest.param("POST", "/api/v1/pods", 405, id="create-without-namespace"),
        pytest.param("DELETE", "/api/v1/pods", 405, id="deletecollection-all-namespaces"),
        pytest.param("DELETE", "/api/v1/namespaces", 405, id="deletecollection-namespaces"),
        pytest.param("PUT", "/api/v1/nodes", 405, id="update-collection"),
        pytest.param("GET", "/api/v1/namespaces/default/nodes", 404, id="cluster-kind-in-namespace"),
        pytest.param("GET", "/api/v1/deployments", 404, id="unknown-resource"),
        pytest.param("GET", "/apis/apps/v1/deployments", 404, id="unknown-group"),
        pytest.param("GET", "/api/v1/nodes/n1/proxy", 404, id="unknown-subresource"),
        pytest.param("GET", "/healthz/nope", 404, id="unknown-path"),
    ],
)
def test_unserved_paths_answer_a_status(sim: EmulatorHandle, method: str, path: str, code: int) -> None:
    with pytest.raises(HookError) as caught:
        sim.call(method, path, {} if method in ("POST", "PUT") else None)
    status = json.loads(caught.value.body)
    assert caught.value.status == code and (status["kind"], status["code"]) == ("Status", code)


def test_discovery_documents(sim: EmulatorHandle) -> None:
    assert sim.call("GET", "/version")["gitVersion"].startswith("v1.")
    assert sim.call("GET", "/api")["versions"] == ["v1"]
    groups = {g["name"] for g in sim.call("GET", "/apis")["groups"]}
    assert groups == {
        "events.k8s.io",
        "coordination.k8s.io",
        "policy",
        "resource.k8s.io",
    }  # policy: eviction, budgets; resource: DRA
    core = {r["name"]: r for r in sim.call("GET", "/api/v1")["resources"]}
    expected = {"pods", "pods/binding", "pods/status", "pods/eviction", "nodes", "nodes/status", "namespaces"}
    assert expected | {"events"} <= set(core)
    # kubectl drain finds the eviction API through the subresource's group and kind
    assert (core["pods/eviction"]["group"], core["pods/eviction"]["kind"]) == ("policy", "Eviction")
    assert (
        core["pods"]["namespaced"]
        and not core["nodes"]["namespaced"]
        and core["pods"]["shortNames"] == ["po"]
    )
    leases = sim.call("GET", "/apis/coordination.k8s.io/v1")["resources"]
    assert [(r["name"], r["kind"]) for r in leases] == [("leases", "Lease")]
    policy = {r["name"]: r["kind"] for r in sim.call("GET", "/apis/policy/v1")["resources"]}
    assert policy["poddisruptionbudgets"] == "PodDisruptionBudget"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"metadata": []}, id="metadata-not-an-object"),
        pytest.param({"metadata": {"name": 7}}, id="numeric-name"),
        pytest.param({"metadata": {"name": "ok", "labels": ["a"]}}, id="labels-list"),
        pytest.param({"metadata": {"name": "ok", "annotations": {"a": 1}}}, id="annotation-number"),
        pytest.param({"metadata": {"name": "ok"}, "spec": ["x"]}, id="spec-list"),
        pytest.param({"metadata": {"name": "ok"}, "status": "up"}, id="status-string"),
    ],
)
def test_malformed_objects_are_400_and_harmless(sim: EmulatorHandle, body: dict[str, Any]) -> None:
    sim.seed([node("ok")])
    for method, path in (
        ("POST", "/api/v1/nodes"),
        ("PUT", "/api/v1/nodes/ok"),
        ("PUT", "/api/v1/nodes/ok/status"),
    ):
        with pytest.raises(HookError) as caught:
            sim.call(method, path, body)
        assert caught.value.status == 400, (method, path)
    assert [n["metadata"]["name"] for n in sim.list("nodes")] == ["ok"]
