"""Only kube-scheduler reaches its verbs (issue 11, finding 6), with the pod as the chart runs it.

The chart's Gunicorn containers and registration worker run as local processes with their rendered
environment and the chart's own Helm-generated certificates (tests/integration/chartpod.py); only ports
and paths are mapped. From this machine's non-loopback address — another pod of the cluster — only
/webhook, /healthz, /readyz and /metrics may answer; /filter, /bind, /preempt and /debug/state must not,
on any port of the pod. kube-scheduler itself, as the rendered KubeSchedulerConfiguration reaches the
extender (URL, CA, serverName and its client certificate), gets answers: on 127.0.0.1 in follow mode,
through the pod IP in acquire mode. Before issue 11 one server listened on 0.0.0.0 with every route and
no client authentication: anyone in the cluster could act as the scheduler and read every reservation.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import urllib3
from chartpod import ChartPod, non_loopback_address, render

pytestmark = pytest.mark.integration

PUBLIC = {"/webhook", "/healthz", "/readyz", "/metrics"}
ROUTES = [
    ("POST", "/filter"),
    ("POST", "/bind"),
    ("POST", "/preempt"),
    ("GET", "/debug/state"),
    ("POST", "/webhook"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
]
BODIES = {
    "/filter": {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}, "NodeNames": ["n"]},
    "/bind": {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n"},
    "/preempt": {
        "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}},
        "NodeNameToMetaVictims": {},
    },
    "/webhook": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "x"}},
}


def answers(host: str, port: int, context: ssl.SSLContext, name: str, method: str, path: str) -> bool:
    """Does the server at host:port answer this request, over HTTPS or plain HTTP (anything but a refused
    connection or TLS handshake, or a 404 for a route it does not have)?"""
    pools = (
        urllib3.HTTPSConnectionPool(
            host,
            port,
            ssl_context=context,
            server_hostname=name,
            assert_hostname=name,
            retries=False,
            timeout=10,
        ),
        urllib3.HTTPConnectionPool(host, port, retries=False, timeout=10),
    )
    body = orjson.dumps(BODIES[path]) if path in BODIES else None
    for pool in pools:
        try:
            response = pool.request(method, path, body=body, headers={"Content-Type": "application/json"})
        except urllib3.exceptions.HTTPError:
            continue
        finally:
            pool.close()
        return response.status != 404
    return False


@pytest.fixture(scope="module", params=["default", "acquire"], ids=["follow", "acquire"])
def pod(request: Any, emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartPod]:
    chart = ChartPod(render(request.param), tmp_path_factory.mktemp(request.param), emulator.kubeconfig)
    try:
        yield chart.start()
    finally:
        chart.close()


def _no_client_certificate(pod: ChartPod) -> ssl.SSLContext:
    return pod.public_tls()  # trusts the serving CA, presents nothing: any other pod of the cluster


def test_from_another_pod_only_the_public_routes_answer(pod: ChartPod) -> None:
    outside = non_loopback_address()
    answered = set()
    for local in sorted(set(pod.ports.values())):
        for method, path in ROUTES:
            if answers(outside, local, _no_client_certificate(pod), pod.server_name(), method, path):
                answered.add(path)
    assert answered == PUBLIC


def test_kube_scheduler_reaches_its_verbs_as_its_configuration_says(pod: ChartPod) -> None:
    host, port, _ = pod.kube_scheduler_target()
    context = pod.kube_scheduler_tls()
    for method, path in (
        ("POST", "/filter"),
        ("POST", "/bind"),
        ("POST", "/preempt"),
        ("GET", "/debug/state"),
    ):
        assert answers(host, port, context, pod.server_name(), method, path), path
    # the same listener refuses a client without kube-scheduler's certificate, wherever it connects from
    assert not answers(host, port, _no_client_certificate(pod), pod.server_name(), "POST", "/filter")


def test_the_public_port_serves_the_webhook_to_the_api_server(pod: ChartPod) -> None:
    outside = non_loopback_address()
    pool = urllib3.HTTPSConnectionPool(
        outside,
        pod.public_port(),
        ssl_context=pod.public_tls(),
        server_hostname=pod.server_name(),
        assert_hostname=pod.server_name(),
        retries=False,
        timeout=10,
    )
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": "CREATE",
            "namespace": "default",
            "object": {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
        },
    }
    response = pool.request(
        "POST", "/webhook", body=orjson.dumps(review), headers={"Content-Type": "application/json"}
    )
    pool.close()
    assert response.status == 200
    assert orjson.loads(response.data)["response"]["uid"] == "u1"
