"""The simulated kube-scheduler against a fake extender (a small HTTP server started here) and the API
emulator: the extender payloads, node order, bind delegation, retries with backoff and the rejection rule."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from sim.emulator.testing import EmulatorOptions, run_emulator, wait_for
from sim.kit import podutil
from sim.kit.kube import Kube, node_path, pod_path
from sim.kubescheduler.extender import Extender, ExtenderConfig, ExtenderError
from sim.kubescheduler.scheduler import SimScheduler
from sim.kubescheduler.state import SchedulerConfig
from sim.nodes.objects import build_cluster, register_nodes

NODES_IN_ZONE_ORDER = ["gpu-node-01", "gpu-node-03", "gpu-node-02", "gpu-node-04"]
Answer = Callable[[dict[str, Any], int], tuple[int, Any]]


@dataclass
class FakeExtender:
    """Records every call; `filter`/`bind` decide the answers (call number starts at 1)."""

    kube: Kube
    filter: Answer
    bind: Answer | None = None
    delay: float = 0.0
    calls: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)

    def answer(self, verb: str, payload: dict[str, Any]) -> tuple[int, Any]:
        self.calls.append((verb, payload, time.monotonic()))
        count = sum(1 for v, _, _ in self.calls if v == verb)
        if verb == "filter":
            return self.filter(payload, count)
        if self.bind is not None:
            status, body = self.bind(payload, count)
            if body.get("Error"):
                return status, body
        binding = {
            "metadata": {"name": payload["PodName"]},
            "target": {"kind": "Node", "name": payload["Node"]},
        }
        self.kube.create(pod_path(payload["PodNamespace"], payload["PodName"], "binding"), binding)
        return 200, {"Error": ""}

    def of(self, verb: str) -> list[dict[str, Any]]:
        return [p for v, p, _ in self.calls if v == verb]


def serve(fake: FakeExtender) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            payload = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, body = fake.answer(self.path.strip("/"), payload)
            if fake.delay:
                time.sleep(fake.delay)
            data = orjson.dumps(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def pick_last(payload: dict[str, Any], count: int) -> tuple[int, Any]:
    names = payload["NodeNames"]
    return 200, {
        "Nodes": None,
        "NodeNames": names[-1:],
        "FailedNodes": {n: "1/8 CardInsufficientMemory" for n in names[:-1]},
        "FailedAndUnresolvableNodes": None,
        "Error": "",
    }


def no_fit(payload: dict[str, Any], count: int) -> tuple[int, Any]:
    failed = {n: "8/8 CardInsufficientMemory" for n in payload["NodeNames"]}
    return 200, {"Nodes": None, "NodeNames": None, "FailedNodes": failed, "Error": ""}


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    options = EmulatorOptions(pod_deletion_delay=0.2, bookmark_interval=0.2)
    with run_emulator(tmp_path / "sim", options=options) as handle:
        client = Kube.from_kubeconfig(handle.kubeconfig)
        register_nodes(client, build_cluster(4, zones=2, gpus_per_node=2))
        try:
            yield client
        finally:
            client.close()


@pytest.fixture
def start(kube: Kube) -> Iterator[Callable[..., tuple[FakeExtender, SimScheduler]]]:
    running: list[tuple[ThreadingHTTPServer, SimScheduler, Extender]] = []

    def starter(
        filter: Answer = pick_last, bind: Answer | None = None, timeout: float = 5.0, **config: Any
    ) -> tuple[FakeExtender, SimScheduler]:
        fake = FakeExtender(kube, filter, bind)
        server = serve(fake)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        extender = Extender(ExtenderConfig(url_prefix=url, http_timeout=timeout))
        settings = {
            "initial_backoff": 0.1,
            "max_backoff": 0.4,
            "unschedulable_timeout": 0.6,
            "max_unschedulable": 3,
            "max_errors": 3,
            "bind_workers": 4,
            **config,
        }
        scheduler = SimScheduler(kube, extender, SchedulerConfig(**settings)).start()
        running.append((server, scheduler, extender))
        return fake, scheduler

    yield starter
    for server, scheduler, extender in running:
        scheduler.stop()
        extender.close()
        server.shutdown()
        server.server_close()


def make_pod(kube: Kube, name: str, scheduler: str = "hami-scheduler", gpu: bool = True) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024} if gpu else {}
    container = {"name": "main", "image": "cuda", "resources": {"requests": {"cpu": "1"}, "limits": limits}}
    pod = {"metadata": {"name": name}, "spec": {"schedulerName": scheduler, "containers": [container]}}
    return kube.create(pod_path("default"), pod)


def pod_of(kube: Kube, name: str) -> dict[str, Any]:
    return kube.get(pod_path("default", name))


def rejected(kube: Kube, name: str) -> str:
    return podutil.annotations_of(pod_of(kube, name)).get(podutil.REJECTED, "")


def test_filter_gets_go_field_names_and_zone_round_robin_then_binds(kube: Kube, start: Any) -> None:
    fake, scheduler = start()
    created = make_pod(kube, "p1")
    wait_for(lambda: podutil.node_name(pod_of(kube, "p1")) == "gpu-node-04", 10, "the pod bound")
    (args,) = fake.of("filter")
    assert set(args) == {"Pod", "Nodes", "NodeNames"} and args["Nodes"] is None
    assert args["NodeNames"] == NODES_IN_ZONE_ORDER
    assert args["Pod"]["metadata"]["uid"] == podutil.uid(created)
    assert fake.of("bind") == [
        {"PodName": "p1", "PodNamespace": "default", "PodUID": podutil.uid(created), "Node": "gpu-node-04"}
    ]
    wait_for(lambda: scheduler.stats_json()["counters"].get("bound") == 1, 5, "the bind recorded")
    stats = scheduler.stats_json()
    assert stats["filter"]["count"] == 1 and stats["bind"]["count"] == 1 and stats["queue"] == {}


def test_pods_without_managed_resources_or_for_other_schedulers(kube: Kube, start: Any) -> None:
    fake, _ = start()
    make_pod(kube, "plain", gpu=False)
    make_pod(kube, "foreign", scheduler="default-scheduler")
    wait_for(lambda: podutil.node_name(pod_of(kube, "plain")), 10, "the plain pod bound in-tree")
    time.sleep(0.3)
    assert fake.calls == []  # not interested: kube-scheduler binds it itself
    assert podutil.node_name(pod_of(kube, "foreign")) == ""


def test_the_default_profile_places_plain_pods_of_default_scheduler(kube: Kube, start: Any) -> None:
    """`sim up` and the demo play the cluster's own default scheduler: a pod asking for no managed device
    (schedulerName default-scheduler, or none) is placed in-tree without our extender; a default-scheduler
    pod that asks for a GPU is not ours to place (the webhook would have handed it to hami-scheduler)."""
    fake, _ = start(default_profile=True)
    make_pod(kube, "plain-default", scheduler="default-scheduler", gpu=False)
    make_pod(kube, "plain-unnamed", scheduler="", gpu=False)
    make_pod(kube, "gpu-default", scheduler="default-scheduler")
    for name in ("plain-default", "plain-unnamed"):
        wait_for(lambda n=name: podutil.node_name(pod_of(kube, n)), 10, f"{name} bound in-tree")
    time.sleep(0.3)
    assert fake.calls == []
    assert podutil.node_name(pod_of(kube, "gpu-default")) == ""


def test_errors_are_retried_with_backoff(kube: Kube, start: Any) -> None:
    def flaky(payload: dict[str, Any], count: int) -> tuple[int, Any]:
        if count == 1:
            return 500, {"oops": True}
        if count == 2:
            return 200, {"NodeNames": None, "FailedNodes": None, "Error": "this replica is not the leader"}
        return pick_last(payload, count)

    fake, scheduler = start(filter=flaky)
    make_pod(kube, "p")
    wait_for(lambda: podutil.node_name(pod_of(kube, "p")), 10, "the pod bound after two errors")
    times = [t for verb, _, t in fake.calls if verb == "filter"]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.1 and times[2] - times[1] >= 0.2  # 1x, then 2x the initial backoff
    condition = next(c for c in pod_of(kube, "p")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["status"] == "True"  # set by the binding after the SchedulerError condition
    assert scheduler.stats_json()["counters"]["filter_errors"] == 1


def test_http_timeout_counts_as_an_error(kube: Kube, start: Any) -> None:
    fake, scheduler = start(timeout=0.3)
    fake.delay = 0.6
    make_pod(kube, "slow")
    wait_for(lambda: len(fake.of("filter")) >= 2, 10, "a retry after the timeout")
    fake.delay = 0.0
    wait_for(lambda: podutil.node_name(pod_of(kube, "slow")), 10, "the pod bound")
    assert scheduler.stats_json()["counters"]["filter_failed_calls"] >= 1


def test_unschedulable_without_cluster_changes_is_rejected(kube: Kube, start: Any) -> None:
    fake, scheduler = start(filter=no_fit)
    make_pod(kube, "huge")
    wait_for(lambda: rejected(kube, "huge"), 10, "the rejection")
    assert len(fake.of("filter")) == 1  # nothing changed: no retry
    reason = rejected(kube, "huge")
    assert reason.startswith("unschedulable: 0/4 nodes are available: 4 8/8 CardInsufficientMemory.")
    assert "no cluster change for 0.6s" in reason
    condition = next(c for c in pod_of(kube, "huge")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert scheduler.pending() == 0 and list(scheduler.stats_json()["rejected"]) == ["default/huge"]


def test_unschedulable_is_retried_on_cluster_events_up_to_the_limit(kube: Kube, start: Any) -> None:
    fake, _ = start(filter=no_fit)
    make_pod(kube, "huge")
    stop = threading.Event()

    def churn() -> None:  # node updates are cluster events that requeue unschedulable pods
        i = 0
        while not stop.wait(0.05):
            i += 1
            kube.patch(node_path("gpu-node-01"), {"metadata": {"labels": {"churn": str(i)}}})

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        wait_for(lambda: rejected(kube, "huge"), 10, "the rejection")
    finally:
        stop.set()
        thread.join()
    assert len(fake.of("filter")) == 3
    assert rejected(kube, "huge").endswith("(3 attempts)")


def test_bind_error_requeues_the_pod_and_filters_it_again(kube: Kube, start: Any) -> None:
    def first_fails(payload: dict[str, Any], count: int) -> tuple[int, Any]:
        return 200, {
            "Error": "node gpu-node-04 has been locked within 5m0s: node lock contention"
            if count == 1
            else ""
        }

    fake, scheduler = start(bind=first_fails)
    make_pod(kube, "p")
    wait_for(lambda: podutil.node_name(pod_of(kube, "p")), 10, "the pod bound on the second try")
    assert len(fake.of("filter")) == 2 and len(fake.of("bind")) == 2
    counters = scheduler.stats_json()["counters"]
    assert counters["bind_errors"] == 1


def test_persistent_errors_reject_the_pod(kube: Kube, start: Any) -> None:
    def broken(payload: dict[str, Any], count: int) -> tuple[int, Any]:
        return 200, {"NodeNames": None, "FailedNodes": None, "Error": "boom"}

    fake, _ = start(filter=broken)
    make_pod(kube, "p")
    wait_for(lambda: rejected(kube, "p"), 10, "the rejection")
    assert rejected(kube, "p") == "error: boom (3 attempts)"
    assert len(fake.of("filter")) == 3


def test_https_extender_with_a_ca_or_insecure(tmp_path: Path, kube: Kube) -> None:
    from sim.emulator import tls

    certs = tls.generate(["127.0.0.1"])
    fake = FakeExtender(kube, pick_last)
    server = serve(fake)
    server.socket = tls.server_context(certs).wrap_socket(server.socket, server_side=True)
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(certs.ca_pem)
    url = f"https://127.0.0.1:{server.server_address[1]}"
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}}
    try:
        for config in (ExtenderConfig(url, ca_file=str(ca_file)), ExtenderConfig(url, insecure=True)):
            extender = Extender(config)
            try:
                answer = extender.filter(pod, ["n1", "n2"])
            finally:
                extender.close()
            assert answer.node_names == ["n2"] and answer.failed == {"n1": "1/8 CardInsufficientMemory"}
        unverified = Extender(ExtenderConfig(url, http_timeout=2.0))
        try:
            with pytest.raises(ExtenderError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
                unverified.filter(pod, ["n1"])
        finally:
            unverified.close()
    finally:
        server.shutdown()
        server.server_close()


def test_without_node_cache_the_nodes_themselves_are_sent(kube: Kube) -> None:
    def echo_last(payload: dict[str, Any], count: int) -> tuple[int, Any]:
        items = payload["Nodes"]["items"]
        return 200, {"Nodes": {"items": items[-1:]}, "NodeNames": None, "FailedNodes": {}, "Error": ""}

    fake = FakeExtender(kube, echo_last)
    server = serve(fake)
    extender = Extender(
        ExtenderConfig(f"http://127.0.0.1:{server.server_address[1]}", node_cache_capable=False)
    )
    nodes = [{"metadata": {"name": n}} for n in ("n1", "n2")]
    try:
        answer = extender.filter({"metadata": {"name": "p"}}, ["n1", "n2"], nodes)
    finally:
        extender.close()
        server.shutdown()
        server.server_close()
    assert answer.node_names == ["n2"]
    (args,) = fake.of("filter")
    assert args["NodeNames"] is None and args["Nodes"]["items"] == nodes
