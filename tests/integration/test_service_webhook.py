"""The admission webhook over real HTTP: AdmissionReview v1 and v1beta1 (reference §1.2, §6).

Round trips: the uid and apiVersion come back, the base64 JSON Patch applies cleanly to the submitted pod
and yields `schedulerName: hami-scheduler` plus HAMi's defaults (exclusive `gpucores: 100` for a count-only
pod, `nvidia.com/gpu: 1` for a memory-only pod); the admitted pod is then created in the API and filtered,
so the webhook's output is exactly what the scheduler consumes. Denials carry HAMi's messages with
allowed=false, code 403 and no patch: privileged, node assigned, pod without containers, and quota — the
limit from a ResourceQuota the registrar published, the usage from the shared ledger. A wrong Content-Type,
an empty body or a body that is not JSON is an HTTP 200 whose review says allowed=false, code 400.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import jsonpatch
import orjson
import pytest

from app.state import snapshot

pytestmark = pytest.mark.integration

V1, V1BETA1 = "admission.k8s.io/v1", "admission.k8s.io/v1beta1"
NODE = "gpu-w"  # the round trips fill its two cards exclusively
QUOTA_NODE = "gpu-q"
QUOTA_NS = "team"


def api_pod(name: str, limits: dict[str, str], namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A pod as the API server hands it to admission: defaulted, schedulerName default-scheduler."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "default-scheduler",
            "restartPolicy": "Always",
            "containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}],
            **spec,
        },
    }


def review(pod: dict[str, Any], uid: str, version: str = V1) -> dict[str, Any]:
    namespace = pod["metadata"].get("namespace", "default")
    return {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": pod["metadata"]["name"],
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "kubernetes-admin",
                "groups": ["system:masters", "system:authenticated"],
            },
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2), cluster.gpu_node(QUOTA_NODE, gpus=1))
    cluster.core.create_namespace({"metadata": {"name": QUOTA_NS}})
    cluster.core.create_namespaced_resource_quota(
        QUOTA_NS,
        {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"limits.nvidia.com/gpumem": "3000"}}},
    )
    svc = start_service()

    def published() -> bool:
        current = snapshot.read(svc.state_dir)
        return {NODE, QUOTA_NODE} <= set(current.nodes) and QUOTA_NS in current.quota_limits

    wait_for(published, 15, "the node and the ResourceQuota in the inventory")
    return svc


def _admit(service: Any, body: dict[str, Any]) -> dict[str, Any]:
    reply = service.post_json("/webhook", body)
    assert reply.status == 200
    answer = dict(reply.json())
    assert answer["kind"] == "AdmissionReview" and answer["apiVersion"] == body["apiVersion"]
    assert answer["response"]["uid"] == body["request"]["uid"]
    return answer["response"]  # type: ignore[no-any-return]


def _patched(pod: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True and response["status"]["code"] == 200
    assert response["patchType"] == "JSONPatch"
    operations = orjson.loads(base64.b64decode(response["patch"]))
    return jsonpatch.JsonPatch(operations).apply(copy.deepcopy(pod))  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", [V1, V1BETA1])
def test_round_trip_mutates_to_hami_and_the_result_schedules(
    version: str, service: Any, cluster: Any
) -> None:
    tag = version.rsplit("/", 1)[-1]
    pod = api_pod(f"count-only-{tag}", {"nvidia.com/gpu": "1"})
    response = _admit(service, review(pod, f"uid-count-{tag}", version))
    mutated = _patched(pod, response)
    assert mutated["spec"]["schedulerName"] == "hami-scheduler"
    assert mutated["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpucores": "100",  # no memory asked: a whole card, exclusively
    }

    memory_only = api_pod(f"memory-only-{tag}", {"nvidia.com/gpumem": "4000"})
    defaulted = _patched(memory_only, _admit(service, review(memory_only, f"uid-mem-{tag}", version)))
    assert defaulted["spec"]["schedulerName"] == "hami-scheduler"
    assert defaulted["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpumem": "4000",
        "nvidia.com/gpu": "1",  # defaultGPUNum
    }

    # the API stores the admitted pod; the scheduler places it as the webhook shaped it
    created = cluster.create_pod(mutated)
    result = service.filter(created, [NODE])
    assert result["NodeNames"] == [NODE] and result["Error"] == ""
    allocation = cluster.pod_annotations(mutated["metadata"]["name"])["hami.io/vgpu-devices-allocated"]
    assert allocation.endswith(",NVIDIA,32768,100:;")


def test_non_gpu_pod_is_allowed_untouched(service: Any) -> None:
    pod = api_pod("plain", {"cpu": "1"})
    response = _admit(service, review(pod, "uid-plain"))
    assert response["allowed"] is True and "patch" not in response


@pytest.mark.parametrize(
    ("name", "pod", "message"),
    [
        (
            "privileged",
            api_pod(
                "priv",
                {"nvidia.com/gpu": "1"},
                containers=[
                    {
                        "name": "main",
                        "image": "cuda",
                        "securityContext": {"privileged": True},
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            ),
            "container main is privileged",
        ),
        ("node-assigned", api_pod("pinned", {"nvidia.com/gpu": "1"}, nodeName=NODE), "pod has node assigned"),
        ("no-containers", api_pod("empty", {}, containers=[]), "pod has no containers"),
        (
            "over-quota",
            api_pod("big", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}, QUOTA_NS),
            "exceeding resource quota: limits.nvidia.com/gpumem in namespace team: used 0, limit 3000, "
            "requested 4000",
        ),
    ],
)
def test_denials_carry_hamis_messages(name: str, pod: dict[str, Any], message: str, service: Any) -> None:
    for version in (V1, V1BETA1):
        response = _admit(service, review(pod, f"uid-{name}", version))
        assert response["allowed"] is False
        assert response["status"] == {"code": 403, "reason": "Forbidden", "message": message}
        assert "patch" not in response and "patchType" not in response


def test_quota_counts_the_ledger_usage(service: Any, cluster: Any) -> None:
    """3000 MiB allowed in the namespace: 2000 is admitted; once a 2000 MiB pod holds a reservation,
    the next 2000 MiB pod exceeds the quota."""
    first = api_pod("quota-a", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}, QUOTA_NS)
    admitted = _patched(first, _admit(service, review(first, "uid-quota-a")))
    second = api_pod("quota-b", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000"}, QUOTA_NS)
    assert _admit(service, review(second, "uid-quota-b0"))["allowed"] is True  # nothing reserved yet

    created = cluster.create_pod(admitted)
    placed = service.filter(created, [QUOTA_NODE])
    assert placed["NodeNames"] == [QUOTA_NODE], placed
    response = _admit(service, review(second, "uid-quota-b1"))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "exceeding resource quota: limits.nvidia.com/gpumem in namespace team: used 2000, limit 3000, "
        "requested 2000"
    )


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", orjson.dumps(review(api_pod("x", {"nvidia.com/gpu": "1"}), "uid-ct"))),
        ("application/json", b""),
        ("application/json", b"{not json"),
    ],
    ids=["wrong-content-type", "empty-body", "not-json"],
)
def test_bad_requests_are_a_400_review_in_an_http_200(content_type: str, body: bytes, service: Any) -> None:
    reply = service.request("POST", "/webhook", body, content_type=content_type)
    assert reply.status == 200
    answer = reply.json()
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 400
    assert answer["response"]["status"]["message"]
