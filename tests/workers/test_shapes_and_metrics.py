"""What informers keep of an object, and the worker's own /metrics and /healthz endpoint."""

from __future__ import annotations

import urllib.error
import urllib.request

from worker_builders import SCHEDULER, VENDORS, allocation, gpu_pod

from app.core.reservations import reservation_from_pod
from workers import roles, shapes
from workers.metrics import MetricsServer, WorkerMetrics, parse_bind


def test_pod_shape_keeps_what_reconciliation_reads() -> None:
    pod = gpu_pod("p", alloc=allocation(("GPU-a", 1000, 10)), init_containers=["init"], init_done=True)
    pod["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{" * 1000
    pod["metadata"]["labels"] = {"app": "x"}
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    pod["spec"]["volumes"] = [{"name": "v"}]
    pod["status"]["conditions"] = [{"type": "Ready"}]
    shaped = shapes.pod_shape(VENDORS)(pod)
    assert set(shaped["metadata"]) == {"name", "namespace", "uid", "annotations", "labels"}
    assert all(k.startswith("hami.io/") for k in shaped["metadata"]["annotations"])
    assert shaped["spec"]["containers"] == [
        {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]
    assert "volumes" not in shaped["spec"] and "conditions" not in shaped["status"]
    assert shaped["status"]["initContainerStatuses"] == [{"state": {"terminated": {"exitCode": 0}}}]
    ours = frozenset({SCHEDULER})
    assert reservation_from_pod(shaped, VENDORS, ours) == reservation_from_pod(pod, VENDORS, ours)


def test_content_ignores_the_resource_version() -> None:
    a = {"metadata": {"name": "n", "resourceVersion": "1"}, "status": {}}
    b = {"metadata": {"name": "n", "resourceVersion": "2"}, "status": {}}
    assert shapes.content(a) == shapes.content(b)


def test_node_shape_keeps_the_lock_but_content_ignores_it() -> None:
    def node(lock: str | None, register: str = "[]") -> dict[str, object]:
        annotations = {"hami.io/node-nvidia-register": register, "other": "x"}
        if lock is not None:
            annotations["hami.io/mutex.lock"] = lock
        return {"metadata": {"name": "n", "resourceVersion": lock or "0", "annotations": annotations}}

    shape = shapes.node_shape(VENDORS)
    locked = shape(node("2026-11-22T04:00:00Z,default,p"))
    assert locked["metadata"]["annotations"] == {
        "hami.io/node-nvidia-register": "[]",
        "hami.io/mutex.lock": "2026-11-22T04:00:00Z,default,p",
    }
    assert shapes.content(locked) == shapes.content(shape(node(None)))  # a bind is no registration change
    assert shapes.content(locked) != shapes.content(shape(node("2026-11-22T04:00:00Z,default,p", "[{}]")))


def test_lease_shape() -> None:
    lease = {
        "metadata": {"name": "l", "namespace": "ns", "managedFields": []},
        "spec": {"holderIdentity": "a", "x": 1},
    }
    assert shapes.lease_shape(lease) == {
        "metadata": {"name": "l", "namespace": "ns"},
        "spec": {"holderIdentity": "a"},
    }


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


def test_metrics_and_healthz() -> None:
    healthy = [True]
    metrics = WorkerMetrics()
    metrics.watch_restarts.labels("pods", "expired").inc()
    server = MetricsServer("127.0.0.1:0", metrics, lambda: healthy[0])
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        status, body = _get(f"{base}/metrics")
        assert status == 200
        assert 'hami_worker_watch_restarts_total{reason="expired",resource="pods"} 1.0' in body
        assert "flask" not in body, "a plain registry of our own, not the process-global one"
        # ...with the process metrics every process exports, once, and the build identity
        assert body.count("# TYPE process_cpu_seconds_total counter") == 1 and "hami_build_info{" in body
        assert _get(f"{base}/healthz") == (200, "ok\n")
        healthy[0] = False
        assert _get(f"{base}/healthz")[0] == 503
        assert _get(f"{base}/other")[0] == 404
    finally:
        server.stop()


def test_parse_bind() -> None:
    assert parse_bind("0.0.0.0:9395") == ("0.0.0.0", 9395)
    assert parse_bind("[::]:9395") == ("::", 9395)


def test_role_labels_change_only_what_differs() -> None:
    def scheduler_pod(name: str, role: str | None) -> dict[str, object]:
        labels = {"app.kubernetes.io/component": "hami-scheduler"}
        if role is not None:
            labels[roles.ROLE_LABEL] = role
        return {"metadata": {"name": name, "namespace": "hami", "labels": labels}}

    found = [scheduler_pod("a", "follower"), scheduler_pod("b", "leader"), scheduler_pod("c", None)]
    assert roles.role_changes(found, "a") == [("a", "leader"), ("b", "follower"), ("c", "follower")]
    assert roles.role_changes([scheduler_pod("a", "leader")], "a") == []
