"""Contended binds never starve the admission webhook or the probes (issue 11, finding 8).

Each /bind that finds its node locked holds a Gunicorn thread for up to `bindLockWait` (here 20 s). With
one server for every route (2 workers x 4 threads) a handful of such binds left no thread for /webhook
(failurePolicy Fail: pod creation refused) or /healthz (liveness restarts). The pod runs as the chart runs
it (tests/integration/chartpod.py, with its registration worker; election off so that it leads): more
contended binds than the extender has threads are sent the way kube-scheduler sends them, and while every
one of them still waits, the webhook and the probes must answer. Their latency is reported.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
import urllib3
from chartpod import ChartPod, render

from app.core import nodelock

pytestmark = pytest.mark.integration

NODE = "gpu-starved"
OVERRIDES = {"extender.bindLockWait": "20s", "extender.workers": 2, "extender.threads": 4}
BINDS = 2 * 4 + 2  # more than the extender's threads


@pytest.fixture(scope="module")
def pod(emulator: Any, cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartPod]:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=1))
    chart = ChartPod(
        render("default", OVERRIDES),
        tmp_path_factory.mktemp("starved"),
        emulator.kubeconfig,
        env_overrides={"HAMI_LEADER_ELECT": "false", "HAMI_REGISTRATION_INTERVAL": "1s"},
    )
    try:
        yield chart.start()
    finally:
        chart.close()


def _kube_scheduler(pod: ChartPod) -> urllib3.HTTPSConnectionPool:
    host, port, _ = pod.kube_scheduler_target()
    name = pod.server_name()
    return urllib3.HTTPSConnectionPool(
        host,
        port,
        ssl_context=pod.kube_scheduler_tls(),
        server_hostname=name,
        assert_hostname=name,
        maxsize=BINDS + 2,
        retries=False,
        timeout=60,
    )


def _public(pod: ChartPod) -> urllib3.HTTPSConnectionPool:
    name = pod.server_name()
    return urllib3.HTTPSConnectionPool(
        "127.0.0.1",
        pod.public_port(),
        ssl_context=pod.public_tls(),
        server_hostname=name,
        assert_hostname=name,
        retries=False,
        timeout=60,
    )


def _post(pool: urllib3.HTTPSConnectionPool, path: str, body: Any) -> Any:
    response = pool.request(
        "POST", path, body=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert response.status == 200, (path, response.status, response.data[:200])
    return orjson.loads(response.data)


REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "during-the-bind-storm",
        "operation": "CREATE",
        "namespace": "default",
        "object": {
            "kind": "Pod",
            "metadata": {"name": "admitted"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        },
    },
}


def test_contended_binds_do_not_starve_the_webhook_or_the_probes(
    pod: ChartPod, cluster: Any, wait_for: Any
) -> None:
    scheduler, public = _kube_scheduler(pod), _public(pod)
    wait_for(lambda: public.request("GET", "/readyz").status == 200, 60, "the pod to be Ready")
    holder = cluster.gpu_pod("holder", gpus=0)
    holder["spec"]["nodeName"] = NODE
    holder["metadata"]["annotations"] = {"hami.io/bind-phase": "allocating"}
    cluster.create_pod(holder)
    cluster.set_node_lock(NODE, nodelock.format_lock(datetime.now(UTC), "default", "holder"))
    pods = []
    for index in range(BINDS):
        created = cluster.create_pod(cluster.gpu_pod(f"waiting-{index}", memory=1000))
        answer = _post(scheduler, "/filter", {"Pod": created, "Nodes": None, "NodeNames": [NODE]})
        assert answer["NodeNames"] == [NODE], answer
        pods.append(created)

    with ThreadPoolExecutor(BINDS) as pool:
        binds: list[Future[Any]] = [
            pool.submit(
                _post,
                scheduler,
                "/bind",
                {
                    "PodName": p["metadata"]["name"],
                    "PodNamespace": "default",
                    "PodUID": p["metadata"]["uid"],
                    "Node": NODE,
                },
            )
            for p in pods
        ]
        time.sleep(2.0)  # every thread of the extender is now waiting for the lock (20 s)
        assert not any(b.done() for b in binds), "a bind did not wait for the held lock"
        started = time.perf_counter()
        review = _post(public, "/webhook", REVIEW)["response"]
        webhook_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        health = public.request("GET", "/healthz").status
        healthz_ms = (time.perf_counter() - started) * 1000
        ready = public.request("GET", "/readyz").status
        waiting = sum(not b.done() for b in binds)
        sys.stderr.write(
            f"\n[starvation] with {waiting} binds waiting for a lock: /webhook {webhook_ms:.0f} ms, "
            f"/healthz {healthz_ms:.0f} ms\n"
        )
        assert waiting == BINDS, "the webhook was answered only after binds gave up: starved"
        assert review["allowed"] is True and review["uid"] == "during-the-bind-storm"
        assert (health, ready) == (200, 200)
        assert cluster.release_lock(NODE, "default", "holder")  # let the binds finish
        for bind in binds:
            bind.result(timeout=90)
    scheduler.close()
    public.close()
