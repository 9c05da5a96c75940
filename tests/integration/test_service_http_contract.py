"""The extender's HTTP contract as kube-scheduler sees it (reference §1.2; invariants 5 and 6).

- /filter and /bind without a body: HTTP 400 with HAMi's text; any other bad input (not JSON, wrong
  shapes, too large, no Pod) is an HTTP 200 whose `Error` says what is wrong — never a 5xx;
- the result always carries every Go field of ExtenderFilterResult, nulls included;
- a pod without device requests is passed through: `NodeNames` echoed, nothing recorded;
- a node with a corrupt registration is excluded with its reason and poisons nothing else;
- a follower (status row leader=False) answers /filter, /bind and /preempt (no node) with a retryable
  `Error` at once (well under kube-scheduler's patience: below 1 s), still answers the webhook, and its
  /readyz is 503; the leader's /readyz is 200.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

pytestmark = pytest.mark.integration

NODE = "gpu-h"
FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
PREEMPT = {"NodeNameToMetaVictims": {NODE: {"Pods": [{"UID": "u-victim"}], "NumPDBViolations": 0}}}
MAX_BODY = 64 * 1024  # the smallest HAMI_MAX_BODY_BYTES (every route accepts 64 KiB)


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1))
    env = {"HAMI_MAX_BODY_BYTES": str(MAX_BODY), "HAMI_FILTER_SYNC_WAIT": "1s"}
    svc = start_service(env=env, registrar="standin")  # the tests flip leadership and sync themselves
    wait_for(lambda: svc.debug_state(NODE)["registered"], 15, f"{NODE} registered")
    return svc


@pytest.mark.parametrize("path", ["/filter", "/bind"])
def test_no_body_is_a_400(path: str, service: Any) -> None:
    reply = service.request("POST", path, None)
    assert reply.status == 400
    assert reply.body.decode() == "Please send a request body"


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'{"Pod": [], "NodeNames": ["a"]}', b'{"Pod": {}, "NodeNames": "a"}', b"null"],
    ids=["not-json", "array", "pod-not-object", "names-not-list", "null"],
)
def test_bad_filter_input_is_an_error_in_a_200(body: bytes, service: Any) -> None:
    reply = service.request("POST", "/filter", body)
    assert reply.status == 200
    answer = reply.json()
    assert set(answer) == FILTER_KEYS
    assert answer["Error"] and answer["NodeNames"] is None and answer["FailedNodes"] is None


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"PodName": 5}', b'{"PodName": "p"}', b"[]"],
    ids=["not-json", "type", "no-node", "array"],
)
def test_bad_bind_input_is_an_error_in_a_200(body: bytes, service: Any) -> None:
    reply = service.request("POST", "/bind", body)
    assert reply.status == 200
    assert set(reply.json()) == {"Error"} and reply.json()["Error"]


def test_too_large_body_is_an_error_in_a_200(service: Any) -> None:
    padding = "x" * (2 * MAX_BODY)
    reply = service.post_json("/filter", {"Pod": {"metadata": {"name": padding}}, "NodeNames": [NODE]})
    assert reply.status == 200
    assert "larger than" in reply.json()["Error"]


def test_missing_pod(service: Any) -> None:
    answer = service.post_json("/filter", {"NodeNames": [NODE]}).json()
    assert answer["Error"] == "extender args missing pod"
    # Go decodes keys case-insensitively; so do we
    answer = service.post_json("/filter", {"pod": None, "nodenames": [NODE]}).json()
    assert answer["Error"] == "extender args missing pod"


def test_pod_without_gpu_is_passed_through(service: Any, cluster: Any) -> None:
    pod = cluster.create_pod(cluster.gpu_pod("web", gpus=0))
    answer = service.filter(pod, ["cpu-1", NODE, "cpu-2"])
    assert answer == {
        "Nodes": None,
        "NodeNames": ["cpu-1", NODE, "cpu-2"],
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": "",
    }
    assert "hami.io/vgpu-node" not in cluster.pod_annotations("web")
    assert service.debug_state()["reservations"] == 0


def test_a_corrupt_node_is_excluded_with_its_reason(service: Any, cluster: Any, wait_for: Any) -> None:
    """Invariant 6: a node whose registration does not decode is left out with the reason; the others
    are decided as usual."""
    corrupt = cluster.gpu_node("corrupt")
    corrupt["metadata"]["annotations"]["hami.io/node-nvidia-register"] = '[{"id": "GPU-x", "count": "ten"}]'
    cluster.add_nodes(corrupt)
    wait_for(lambda: service.debug_state()["unusable"].get("corrupt"), 15, "the corrupt node reported")

    huge = cluster.create_pod(cluster.gpu_pod("huge", memory=40000))
    answer = service.filter(huge, ["corrupt", NODE, "cpu-only"])
    assert answer["Error"] == "" and answer["NodeNames"] is None
    failed = answer["FailedNodes"]
    assert failed["corrupt"].startswith("node unregistered: hami.io/node-nvidia-register:"), failed
    assert failed[NODE] == "1/1 CardInsufficientMemory"
    assert failed["cpu-only"] == "node unregistered"

    small = cluster.create_pod(cluster.gpu_pod("small", memory=1000))
    assert service.filter(small, ["corrupt", NODE])["NodeNames"] == [NODE]


def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_follower_refuses_fast_and_is_not_ready(service: Any, cluster: Any, wait_for: Any) -> None:
    assert service.get("/readyz").status == 200  # the leader, synced, fresh heartbeat
    assert service.get("/healthz").status == 200
    pod = cluster.create_pod(cluster.gpu_pod("while-follower", memory=1000))
    registrar = service.registrar
    registrar.set_leader(False)
    try:
        reply = wait_for(lambda: (r := service.get("/readyz")).status == 503 and r, 10, "/readyz 503")
        assert "not the leader" in reply.body.decode()

        for _ in range(3):  # whichever worker answers
            answer, seconds = _timed(lambda: service.filter(pod, [NODE]))
            assert answer["NodeNames"] is None and answer["FailedNodes"] is None
            assert "not the leader" in answer["Error"] and answer["Error"].endswith("retry later")
            assert seconds < 1.0, f"a follower took {seconds:.2f}s to refuse /filter"
            answer, seconds = _timed(lambda: service.bind(pod, NODE))
            assert "not the leader" in answer["Error"] and answer["Error"].endswith("retry later")
            assert seconds < 1.0, f"a follower took {seconds:.2f}s to refuse /bind"
            reply, seconds = _timed(lambda: service.post_json("/preempt", PREEMPT | {"Pod": pod}))
            assert reply.status == 200 and reply.json()["NodeNameToMetaVictims"] == {}  # preempt nothing
            assert "not the leader" in reply.json()["Error"] and reply.json()["Error"].endswith("retry later")
            assert seconds < 1.0, f"a follower took {seconds:.2f}s to refuse /preempt"
        assert "hami.io/vgpu-node" not in cluster.pod_annotations("while-follower")
        assert cluster.node_lock(NODE) is None

        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u-follower", "operation": "CREATE", "namespace": "default", "object": pod},
        }
        assert service.post_json("/webhook", review).json()["response"]["allowed"] is True  # stateless
    finally:
        registrar.set_leader(True)

    wait_for(lambda: service.get("/readyz").status == 200, 10, "/readyz 200 again")
    assert service.filter(cluster.pod("while-follower"), [NODE])["NodeNames"] == [NODE]


def test_not_synced_leader_is_not_ready_and_refuses(service: Any, cluster: Any, wait_for: Any) -> None:
    pod = cluster.create_pod(cluster.gpu_pod("while-syncing", memory=1000))
    service.registrar.set_synced(False)
    try:
        reply = wait_for(lambda: (r := service.get("/readyz")).status == 503 and r, 10, "/readyz 503")
        assert "syncing" in reply.body.decode()
        answer = service.filter(pod, [NODE])  # waits up to HAMI_FILTER_SYNC_WAIT, then refuses
        assert "still syncing" in answer["Error"] and answer["Error"].endswith("retry later")
    finally:
        service.registrar.set_synced(True)
    wait_for(lambda: service.get("/readyz").status == 200, 10, "/readyz 200 again")


def test_unknown_route_and_method_are_json_errors(service: Any) -> None:
    assert service.get("/nope").status == 404
    reply = service.get("/filter")
    assert reply.status == 405
    assert orjson.loads(reply.body)["Error"]
