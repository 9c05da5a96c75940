"""Every input `python -m sim fuzz` found to break the service, replayed through the real processes.

Each case names the seed and category that found it. The unit-level twins are in tests/core, tests/workers
and tests/routes (test_fuzz_regressions.py / test_request_bodies.py); here the same inputs go through
Gunicorn, the Flask app, the registration worker and the API emulator, where the symptom showed:

- seed 1, absurd-value: a quantity of 4400+ digits -> "internal error: ValueError" (filter and webhook);
- seed 1, deep-nesting: a review nesting 900 levels -> "internal error: RecursionError" (webhook; the
  extender verbs answer such bodies as any other);
- seed 1, planted pods: an allocation annotation of 5000 digits -> the worker's pod informer re-listed for
  ever, so the ledger stopped following the API (one pod stopped scheduling);
- seed 2, huge-body: after a body over the cap the next request on the kept-alive connection failed
  ("Remote end closed connection without response"), and so after any unread body over 64 KiB;
- seed 0, raw-http: broken chunked framing -> "internal error: InvalidChunkSize";
- found while probing the raw-http category: a body that stops arriving held a worker thread for good;
- seed 2, wrong-type: `Nodes: {}` next to NodeNames was answered with nothing at all.
"""

from __future__ import annotations

import socket
from typing import Any

import orjson
import pytest

pytestmark = pytest.mark.integration

NODE = "gpu-fz"
CAP = 256 * 1024
DIGITS = "1" + "0" * 4400 + "Gi"


@pytest.fixture(scope="module")
def service(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> Any:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1))
    svc = start_service(registrar="worker", env={"HAMI_MAX_BODY_BYTES": str(CAP)})
    wait_for(lambda: svc.debug_state(NODE)["registered"], 30, f"{NODE} registered")
    return svc


def gpu_pod(limits: dict[str, str], name: str = "fz") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "c", "resources": {"limits": limits}}],
        },
    }


def review(pod: Any) -> dict[str, Any]:
    request = {"uid": "fz", "operation": "CREATE", "namespace": "default", "object": pod}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def error_of(path: str, answer: dict[str, Any]) -> str:
    if path == "/webhook":
        return str(answer["response"]["status"].get("message", ""))
    return str(answer["Error"])


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/filter",
            {"Pod": gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": DIGITS}), "NodeNames": [NODE]},
            "in container c",
        ),
        (
            "/webhook",
            review(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": DIGITS})),
            "in container c",
        ),
        (
            "/filter",
            {"Pod": gpu_pod({"nvidia.com/gpu": "1"}), "Nodes": {}, "NodeNames": [NODE]},
            "without any",
        ),
    ],
    ids=["filter-4400-digits", "webhook-4400-digits", "empty-nodes"],
)
def test_absurd_values_are_clear_errors(path: str, body: Any, message: str, service: Any) -> None:
    reply = service.post_json(path, body)
    assert reply.status == 200
    error = error_of(path, reply.json())
    assert message in error and "internal error" not in error


@pytest.mark.parametrize("path", ["/filter", "/bind", "/webhook"])
def test_a_recursion_bomb_is_answered(path: str, service: Any) -> None:
    bomb = b'{"a":' * 900 + b"1" + b"}" * 900
    body = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"object":' + bomb + b"}}"
    reply = service.request("POST", path, body)
    assert reply.status == 200
    error = error_of(path, reply.json())
    assert "internal error" not in error
    if path == "/webhook":
        assert "nested deeper than" in error


@pytest.mark.parametrize(
    ("path", "content_type", "size"),
    [
        ("/filter", "application/json", CAP + 1),
        ("/filter", "application/json", 3 * CAP),
        ("/bind", "application/json", 2 * CAP),
        ("/webhook", "application/json", 3 * CAP),
        ("/webhook", "text/plain", CAP // 2),
        ("/healthz", "application/json", 32 * 1024),  # within the 64 KiB every other route accepts
    ],
    ids=["just-over", "filter-3x", "bind-2x", "webhook-3x", "webhook-wrong-type-unread", "get-route-unread"],
)
def test_the_next_request_on_the_connection_still_works(
    path: str, content_type: str, size: int, service: Any
) -> None:
    body = b'{"pad": "' + b"x" * size + b'"}'
    first = service.request("POST", path, body, content_type=content_type)
    assert first.status in (200, 405)
    if size > CAP:
        assert "larger than" in error_of(path, first.json())
        assert first.headers.get("Connection") == "close"
    for _ in range(3):  # urllib3 reuses the pooled connection unless the server said close
        assert service.get("/healthz").status == 200


def raw(service: Any, data: bytes, timeout: float = 60.0) -> tuple[int, bytes]:
    """Write `data` on a new connection and read until the server closes; (status, body)."""
    host, port = service.url.removeprefix("http://").split(":")
    answer = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and answer.split(b"\r\n\r\n", 1)[1].endswith(b"}"):
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


@pytest.mark.parametrize("path", ["/filter", "/bind", "/webhook"])
def test_broken_chunked_framing_is_an_error(path: str, service: Any) -> None:
    request = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    request += "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    status, body = raw(service, request.encode())
    assert status == 200
    assert error_of(path, orjson.loads(body)).startswith("could not read the request body")


def test_a_body_that_stops_arriving_frees_the_thread_with_an_error(service: Any) -> None:
    request = (
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    status, body = raw(service, request)  # the rest never comes; the connection stays open
    assert status == 200
    assert orjson.loads(body)["Error"] == "could not read the request body: timed out"


def test_a_poison_pod_never_stops_the_worker(service: Any, cluster: Any, wait_for: Any) -> None:
    poison = cluster.gpu_pod("poison")
    poison["metadata"]["annotations"] = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-devices-allocated": f"GPU-{NODE}-0,NVIDIA," + "9" * 5000 + ",10:;",
    }
    poison["spec"]["nodeName"] = NODE
    cluster.create_pod(poison)
    legit = cluster.gpu_pod("after-poison")
    legit["metadata"]["annotations"] = {
        "hami.io/vgpu-node": NODE,
        "hami.io/vgpu-devices-allocated": f"GPU-{NODE}-0,NVIDIA,1000,10:;",
    }
    legit["spec"]["nodeName"] = NODE
    uid = cluster.create_pod(legit)["metadata"]["uid"]
    wait_for(lambda: service.ledger.get(uid) is not None, 30, "the pod after the poison to be counted")
    assert service.get("/readyz").status == 200
    log = service.worker.log()
    assert "allocation annotation is corrupt" in log and "informer handler failed" not in log
    pod = cluster.create_pod(cluster.gpu_pod("still-schedules", memory=1000, cores=10))
    assert service.filter(pod, [NODE])["NodeNames"] == [NODE]
