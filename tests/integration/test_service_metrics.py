"""/metrics after real traffic, aggregated across Gunicorn workers (reference §8).

Traffic of known size is sent over fresh connections until at least two worker processes have served
/filter (checked in the multiprocess files themselves). Then every scrape — whichever worker answers it —
must report: request counters whose totals equal what was sent; the phase histograms of /filter and /bind
and the /webhook histogram with one observation per decided request; HAMi's allocation gauges (device
limits, allocated memory, shared count, per-pod vGPU memory, `zone="vGPU"`) rendered from the shared
ledger by the registration worker (at most one render interval behind), so they agree with the pods that
were placed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

NODE = "gpu-m"
MIB = 1024 * 1024
PLACED, UNSCHEDULABLE, BAD, BOUND = 6, 2, 2, 3
CLOSE = {"Connection": "close"}


def scrape(service: Any) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """sample name -> sorted label pairs -> value."""
    reply = service.http.request("GET", f"{service.url}/metrics", headers=CLOSE)
    assert reply.status == 200
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(reply.data.decode()):
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def total(samples: dict[str, Any], name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for key, v in samples.get(name, {}).items() if wanted <= set(key))


@pytest.fixture(scope="module")
def traffic(
    start_service: Any, cluster: Any, emulator: Any, wait_for: Any
) -> tuple[Any, dict[str, int], list[str]]:
    emulator.reset()
    cluster.add_nodes(cluster.gpu_node(NODE, gpus=2))
    service = start_service(workers=2)
    wait_for(lambda: service.debug_state(NODE)["registered"], 15, f"{NODE} registered")
    sent = {"filter": 0, "filter_observed": 0, "bind": 0, "webhook": 0, "webhook_observed": 0}

    def post(path: str, body: bytes, content_type: str = "application/json") -> Any:
        reply = service.http.request(
            "POST", f"{service.url}{path}", body=body, headers={"Content-Type": content_type, **CLOSE}
        )
        assert reply.status == 200
        return reply.json()

    def filter_pod(pod: dict[str, Any]) -> dict[str, Any]:
        sent["filter"] += 1
        sent["filter_observed"] += 1
        return dict(post("/filter", orjson.dumps({"Pod": pod, "NodeNames": [NODE]})))

    placed, unplaced = [], []
    for i in range(PLACED):
        pod = cluster.create_pod(cluster.gpu_pod(f"m-{i}", memory=1000))
        assert filter_pod(pod)["NodeNames"] == [NODE]
        placed.append(pod)
    for i in range(UNSCHEDULABLE):
        pod = cluster.create_pod(cluster.gpu_pod(f"huge-{i}", memory=40000))
        assert filter_pod(pod)["FailedNodes"] == {NODE: "2/2 CardInsufficientMemory"}
        unplaced.append(pod)
    for _ in range(BAD):
        sent["filter"] += 1
        assert post("/filter", b"{oops")["Error"]
    plain = cluster.create_pod(cluster.gpu_pod("plain", gpus=0))
    # pass-through requests until two processes have served /filter (fresh connection each time)
    wait_for(
        lambda: filter_pod(plain) and len(service.counter_by_worker("hami_scheduler_filter_results")) >= 2,
        30,
        "a second worker to serve /filter",
    )

    for pod in placed[:BOUND]:
        meta = pod["metadata"]
        sent["bind"] += 1
        args = {"PodName": meta["name"], "PodNamespace": "default", "PodUID": meta["uid"], "Node": NODE}
        assert post("/bind", orjson.dumps(args)) == {"Error": ""}
        cluster.allocate(NODE)
    sent["bind"] += 1
    meta = unplaced[0]["metadata"]  # a pod Filter did not place: its bind is refused
    wrong = {"PodName": meta["name"], "PodNamespace": "default", "PodUID": meta["uid"], "Node": NODE}
    assert "filtered onto node <none>" in post("/bind", orjson.dumps(wrong))["Error"]

    for i, limits in enumerate([{"nvidia.com/gpu": "1"}, {"cpu": "1"}, {"nvidia.com/gpu": "1"}]):
        pod = cluster.gpu_pod(f"w-{i}", gpus=0)
        pod["spec"]["containers"][0]["resources"] = {"limits": limits}
        if i == 2:
            pod["spec"]["nodeName"] = NODE  # denied: pod has node assigned
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        review["request"] = {"uid": f"w{i}", "operation": "CREATE", "namespace": "default", "object": pod}
        sent["webhook"] += 1
        sent["webhook_observed"] += 1
        post("/webhook", orjson.dumps(review))
    sent["webhook"] += 1
    assert post("/webhook", b"{}", "text/plain")["response"]["status"]["code"] == 400
    return service, sent, [p["metadata"]["name"] for p in placed]


def test_counters_and_histograms_sum_over_workers(traffic: Any) -> None:
    service, sent, _ = traffic
    served = service.counter_by_worker("hami_scheduler_filter_results")
    assert len(served) >= 2 and sum(served.values()) == sent["filter"]
    for _ in range(4):  # whichever worker answers the scrape
        samples = scrape(service)
        assert total(samples, "hami_scheduler_filter_results_total") == sent["filter"]
        assert total(samples, "hami_scheduler_filter_results_total", result="unschedulable") == UNSCHEDULABLE
        assert total(samples, "hami_scheduler_filter_results_total", result="error") == BAD
        assert total(samples, "hami_scheduler_filter_duration_seconds_count") == sent["filter_observed"]
        filter_count = "hami_scheduler_filter_phase_duration_seconds_count"
        for phase in ("decode", "prepare", "fit", "assume", "patch"):
            assert total(samples, filter_count, phase=phase) >= 1, phase
        assert total(samples, filter_count, phase="assume") == PLACED

        assert total(samples, "hami_scheduler_bind_results_total") == sent["bind"]
        assert total(samples, "hami_scheduler_bind_results_total", result="bound", reason="ok") == BOUND
        refused = total(samples, "hami_scheduler_bind_results_total", reason="not-filtered-here")
        assert refused == 1
        assert total(samples, "hami_scheduler_bind_duration_seconds_count") == sent["bind"]
        bind_count = "hami_scheduler_bind_phase_duration_seconds_count"
        assert total(samples, bind_count, phase="pod_lookup") == BOUND + 1  # the refused bind got that far
        for phase in ("lock", "patch", "binding"):
            assert total(samples, bind_count, phase=phase) == BOUND, phase
        # GPU pods: taking the node lock reads the node, so there is no separate node lookup
        assert total(samples, bind_count, phase="node_lookup") == 0
        assert total(samples, "hami_scheduler_node_lock_wait_seconds_count") == BOUND

        assert total(samples, "hami_scheduler_webhook_results_total") == sent["webhook"]
        assert total(samples, "hami_scheduler_webhook_results_total", result="denied") == 1
        assert total(samples, "hami_scheduler_webhook_duration_seconds_count") == sent["webhook_observed"]


def test_hami_gauges_describe_the_placed_pods(traffic: Any, wait_for: Any) -> None:
    service, _, placed = traffic

    def rendered() -> dict[str, Any] | None:
        # The registration worker renders these gauges every HAMI_STATE_METRICS_INTERVAL (1 s here).
        samples = scrape(service)
        return samples if total(samples, "hami_vgpu_memory_allocated_bytes") == PLACED * 1000 * MIB else None

    samples = wait_for(rendered, 15, "HAMi's gauges to show the placed pods")
    devices = {f"GPU-{NODE}-0", f"GPU-{NODE}-1"}
    limits = samples["hami_gpu_memory_limit_bytes"]
    assert {dict(k)["device_uuid"] for k in limits} == devices
    for key, value in limits.items():
        labels = dict(key)
        assert labels["node"] == NODE and labels["zone"] == "vGPU" and labels["device_type"]
        assert value == 32768 * MIB
    assert set(samples["hami_gpu_core_limit_ratio"].values()) == {100}
    assert total(samples, "hami_gpu_memory_allocated_bytes", node=NODE) == PLACED * 1000 * MIB
    assert total(samples, "hami_gpu_shared_count", node=NODE) == PLACED
    assert {dict(k)["device_cores"] for k in samples["hami_gpu_memory_allocated_bytes"]} == {"100"}
    per_pod = samples["hami_vgpu_memory_allocated_bytes"]
    assert {dict(k)["pod"] for k in per_pod} == set(placed)
    assert all(dict(k)["container_index"] == "0" and v == 1000 * MIB for k, v in per_pod.items())
    assert total(samples, "hami_scheduler_ledger_reservations") == PLACED
    assert total(samples, "hami_scheduler_nodes_registered") == 1
    assert total(samples, "hami_scheduler_leader") == 1 and total(samples, "hami_scheduler_synced") == 1


def _start_time(pid: int) -> float:
    """A process's start time in seconds since the epoch, from /proc (as prometheus_client computes it)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    ticks = int(stat[stat.rfind(")") + 2 :].split()[19])
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _rss(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_build_info_and_process_metrics_of_the_whole_gunicorn_tree(traffic: Any) -> None:
    service, _, _ = traffic
    samples = scrape(service)
    ((labels, value),) = samples["hami_build_info"].items()
    assert value == 1 and {"version", "revision", "build_date", "python_version", "platform"} <= set(
        dict(labels)
    )
    master = service.process.pid
    # Any worker answers; the numbers are the master's and its workers' together, not one process's.
    assert total(samples, "process_start_time_seconds") == pytest.approx(_start_time(master), abs=0.02)
    assert total(samples, "process_resident_memory_bytes") > 1.5 * _rss(master)
    assert total(samples, "process_cpu_seconds_total") > 0 and total(samples, "process_open_fds") > 0
    assert "python_info" in samples


def test_worker_port_serves_hami_gauges_where_hami_does(traffic: Any, wait_for: Any) -> None:
    service, _, placed = traffic
    assert service.worker is not None, "this module runs the real registration worker"
    url = f"http://{service.worker_env['HAMI_WORKER_METRICS_BIND']}/metrics"

    def worker_scrape(query: str = "") -> str | None:
        reply = service.http.request("GET", url + query, headers=CLOSE)
        assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return str(reply.data.decode())

    def current() -> str | None:
        text = worker_scrape()
        return text if text and f'pod="{placed[-1]}"' in text else None

    text = wait_for(current, 15, "the worker's /metrics to carry HAMi's gauges")
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(names) == len(set(names)), "a family appears twice"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {"hami_gpu_memory_limit_bytes", "hami_vgpu_memory_allocated_bytes", "hami_build_info"} <= set(
        families
    )
    assert {"hami_worker_leader", "process_resident_memory_bytes", "python_gc_objects_collected"} <= set(
        families
    )
    without = worker_scrape("?hami_gauges=0") or ""
    assert "hami_worker_leader" in without and "hami_gpu_memory_limit_bytes" not in without
    reply = service.http.request("GET", f"{service.url}/metrics?hami_gauges=0", headers=CLOSE)
    assert b"hami_scheduler_leader" in reply.data and b"hami_gpu_memory_limit_bytes" not in reply.data
