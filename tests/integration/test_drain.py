"""`kubectl drain` of the serving leader's node completes with the chart's PodDisruptionBudget.

Two replicas — real Gunicorn services with real registration workers — run as the pods of the chart's
Deployment on two nodes of the API emulator: their Pod objects carry the chart's pod labels, the chart's
rendered PodDisruptionBudget (minAvailable 1, unhealthyPodEvictionPolicy AlwaysAllow) selects them, and a
small kubelet stand-in here sets each pod's Ready condition from the replica's /readyz and sends SIGTERM
when the pod is deleted. `sim.cluster.disruption.DisruptionController` computes the budget's status the way
kube-controller-manager's disruption controller does (the emulator, like the real API server, only reads
it). The real `kubectl drain` then cordons the leader's node and evicts through the eviction API, retrying
refusals every 5 s.

- acquire mode: the cordoned leader releases its Lease (workers/handover.py); the standby takes it, syncs
  and becomes Ready; the old leader is no longer Ready, so the budget lets the eviction through.
- follow mode: kube-scheduler holds the Lease; the cordoned leader reports not ready while it keeps
  deciding, the eviction goes through, and on SIGTERM the pod's kube-scheduler releases the Lease
  (kube-scheduler runs its election with ReleaseOnCancel) — played here by `SchedulerLease` — and the
  standby's kube-scheduler acquires it, which the standby's worker follows.

Before the cordon, evicting the leader is refused (the budget protects the only Ready pod). The failover
time (cordon to the standby Ready) and the drain time are printed (`-s`) and written to docs/install.md.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as kclient
from kubernetes import config as kconfig

from sim.cluster.disruption import DisruptionController
from sim.kit.kube import Kube

pytestmark = [pytest.mark.integration, pytest.mark.kubectl]

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".tools" / "bin" / "kubectl"
HELM = REPO / ".tools" / "bin" / "helm"
NAMESPACE = "hami-system"
NODES = ("cp-a", "cp-b")
GPU_NODE = "gpu-drain"
LEASE = {"HAMI_LEASE_DURATION": "4s", "HAMI_RENEW_DEADLINE": "3s", "HAMI_RETRY_PERIOD": "1s"}


def chart(*sets: str) -> list[dict[str, Any]]:
    """The chart rendered with helm, as the cluster would get it."""
    args = [str(HELM), "template", "hami-scheduler", str(REPO / "helm" / "hami-scheduler"), "-n", NAMESPACE]
    for value in sets:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


class Kubelet:
    """Per replica: the pod's Ready condition from /readyz, and SIGTERM once the pod is being deleted."""

    def __init__(self, core: Any, replicas: dict[str, Any], on_stop: Any) -> None:
        self.core, self.replicas, self.on_stop = core, replicas, on_stop
        self.stopped: dict[str, float] = {}
        self.ready_since: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _ready(self, service: Any) -> bool:
        try:
            return bool(service.get("/readyz").status == 200)
        except Exception:
            return False

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for name, service in self.replicas.items():
                if name in self.stopped:
                    continue
                try:
                    pod = self.core.read_namespaced_pod(name, NAMESPACE)
                except kclient.ApiException as exc:
                    pod = None if exc.status == 404 else False
                if pod is False:
                    continue
                if pod is None or pod.metadata.deletion_timestamp is not None:
                    self.stopped[name] = time.monotonic()
                    self.on_stop(name)
                    service.terminate()  # SIGTERM: the worker releases its Lease (acquire mode)
                    continue
                ready = self._ready(service)
                if ready and name not in self.ready_since:
                    self.ready_since[name] = time.monotonic()
                elif not ready:
                    self.ready_since.pop(name, None)
                status = {"conditions": [{"type": "Ready", "status": str(ready)}], "phase": "Running"}
                self.core.patch_namespaced_pod_status(name, NAMESPACE, {"status": status})


def kubectl(kubeconfig: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    if not KUBECTL.exists():
        pytest.fail(f"kubectl is missing at {KUBECTL}: run `make tools` first")
    return subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("mode", ["acquire", "follow"])
def test_drain_of_the_leaders_node_completes(
    mode: str, start_service: Any, cluster: Any, emulator: Any, wait_for: Any, scheduler_lease: Any
) -> None:
    emulator.reset()
    manifests = chart("replicas=2", f"leaderElection.mode={mode}")
    (budget,) = [d for d in manifests if d["kind"] == "PodDisruptionBudget"]
    (deployment,) = [d for d in manifests if d["kind"] == "Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    api: Any = kconfig.new_client_from_config(config_file=str(emulator.kubeconfig))  # type: ignore[no-untyped-call]
    core, policy = kclient.CoreV1Api(api), kclient.PolicyV1Api(api)
    for create in (
        lambda: core.create_namespace({"metadata": {"name": NAMESPACE}}),
        lambda: policy.create_namespaced_pod_disruption_budget(NAMESPACE, budget),
    ):
        try:
            create()
        except kclient.ApiException as exc:  # left by the other mode's run (reset keeps namespaces)
            assert exc.status == 409, exc
    cluster.add_nodes(
        cluster.gpu_node(GPU_NODE, gpus=1),
        *({"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}} for n in NODES),
    )
    names = [f"hami-scheduler-{n}" for n in NODES]
    for name, node in zip(names, NODES, strict=True):
        pod = {
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "x", "image": "x"}],
            },
            "status": {"phase": "Running"},
        }
        core.create_namespaced_pod(NAMESPACE, pod)
        core.patch_namespaced_pod_status(name, NAMESPACE, {"status": {"phase": "Running"}})
    election = {"HAMI_LEADER_ELECT": "true", "HAMI_LEADER_ELECT_MODE": mode, **LEASE}
    if mode == "follow":
        scheduler_lease.hold(f"{names[0]}_uuid-a")  # kube-scheduler of pod a leads
        election |= {
            "HAMI_LEADER_ELECT_RESOURCE_NAME": "kube-scheduler",
            "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": "default",
        }
    else:
        election |= {
            "HAMI_LEADER_ELECT_RESOURCE_NAME": "hami-scheduler-extender",
            "HAMI_LEADER_ELECT_RESOURCE_NAMESPACE": NAMESPACE,
        }
    replicas = {}
    for name, node in zip(names, NODES, strict=True):
        env = {
            **election,
            "POD_NAME": name,
            "POD_NAMESPACE": NAMESPACE,
            "NODE_NAME": node,
            "HAMI_LOG_LEVEL": "INFO",
        }
        replicas[name] = start_service(workers=1, env=env, registrar="worker", wait_ready=(name == names[0]))

    def on_stop(name: str) -> None:
        if mode == "follow" and name == names[0]:
            scheduler_lease.stop()
            scheduler_lease.write("", time.time())  # kube-scheduler's ReleaseOnCancel: an empty holder
            time.sleep(1.0)  # the standby kube-scheduler's next retry
            scheduler_lease.hold(f"{names[1]}_uuid-b")

    kubelet = Kubelet(core, replicas, on_stop)
    kube = Kube.from_kubeconfig(emulator.kubeconfig)
    controller = DisruptionController(kube, NAMESPACE, budget["metadata"]["name"]).start()
    kubelet.start()
    try:
        leader, standby = names
        wait_for(lambda: leader in kubelet.ready_since, 30, "the leader's pod to be Ready")
        follower = "this replica is not the leader"
        wait_for(lambda: follower in replicas[standby].get("/readyz").body.decode(), 60, "the standby to run")
        pdb_name = budget["metadata"]["name"]

        def counted() -> bool:
            return bool(
                policy.read_namespaced_pod_disruption_budget(pdb_name, NAMESPACE).status.current_healthy == 1
            )

        wait_for(counted, 10, "the budget to count the leader")
        # The budget protects the serving leader: an eviction without the cordon is refused.
        eviction = {"metadata": {"name": leader, "namespace": NAMESPACE}}
        with pytest.raises(kclient.ApiException) as refused:
            core.create_namespaced_pod_eviction(leader, NAMESPACE, eviction)
        assert refused.value.status == 429 and "disruption budget" in str(refused.value.body)
        assert standby not in kubelet.ready_since and leader in kubelet.ready_since

        started = time.monotonic()
        drain = kubectl(
            emulator.kubeconfig, "drain", NODES[0], "--force", "--ignore-daemonsets", "--timeout=90s"
        )
        drained = time.monotonic()
        assert drain.returncode == 0, drain.stderr
        assert f"pod/{leader} evicted" in drain.stdout
        standby_ready = wait_for(lambda: kubelet.ready_since.get(standby), 30, "the standby to be Ready")
        failover = standby_ready - started
        took = drained - started
        print(f"\n[{mode}] cordon -> standby Ready {failover:.1f} s, drain completed in {took:.1f} s")
        assert failover < 30 and drained - started < 90
        # The new leader decides.
        service = replicas[standby]
        pod = cluster.create_pod(cluster.gpu_pod("after-drain", memory=1000))
        assert service.filter(pod, [GPU_NODE])["NodeNames"] == [GPU_NODE]
        assert kubelet.stopped.get(leader) is not None
    finally:
        kubelet.close()
        controller.close()
        kube.close()
        api.close()
