"""Start a whole cluster on either control plane from its `ClusterSpec`: `build`, the one way every scenario
(demo, `sim up`, the fuzzer, the real-control-plane chaos storm) and the harness's fixtures start one.

Emulator: the API emulator, the simulated GPU nodes (`python -m sim nodes`), the registration worker
(`python -m workers`), our service (`gunicorn -c config/gunicorn.conf.py wsgi:app`, Ready with every node
registered) and the simulated kube-scheduler (`python -m sim scheduler`), each waited for. Real: the same
cluster configured from our chart on etcd + kube-apiserver + kube-scheduler (`sim.cluster.realcluster`). Every
process is a child of the `Stack`, which stops them all by PID; a spec the builder cannot honour
(`ClusterSpec.problem`) fails before anything starts.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from sim.cluster.image import ImageRunner
from sim.cluster.realcluster import start_real_cluster
from sim.cluster.spec import REAL, ClusterSpec
from sim.cluster.stack import (
    PY,
    DemoFailure,
    Stack,
    free_port,
    serve_tls,
    service_ready,
    start_nodes,
    vendor_env,
    wait_until,
)
from sim.controlplane import SchedulerSpec
from sim.controlplane.base import DEFAULT_SCHEDULER
from sim.kit.kube import Kube
from sim.kit.processes import wait_for_http


def extender_config(url: str, ca_file: Path | None, default_scheduler: bool = False) -> dict[str, object]:
    """The simulated scheduler's KubeSchedulerConfiguration: the chart's extender entry, at `url`; with
    `default_scheduler` a second profile, the cluster's own `default-scheduler` (in-tree only)."""
    tls = {"insecure": False, "caFile": str(ca_file)} if ca_file else {}
    extender: dict[str, object] = {
        "urlPrefix": url,
        "filterVerb": "filter",
        "bindVerb": "bind",
        "enableHTTPS": bool(ca_file),
        "nodeCacheCapable": True,
        "httpTimeout": "30s",
        **({"tlsConfig": tls} if tls else {}),
    }
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": "hami-scheduler"},
            *([{"schedulerName": DEFAULT_SCHEDULER}] if default_scheduler else []),
        ],
        "extenders": [extender],
    }


def build(spec: ClusterSpec, stack: Stack) -> Kube:
    """Control plane, nodes, worker, service (waited for until Ready with every node) and scheduler, as
    `spec` describes them (see sim.cluster.spec); the API client returned is also `stack.kube`."""
    problem = spec.problem()
    if problem:
        raise DemoFailure(problem)
    if spec.from_image:
        stack.image = ImageRunner(spec.from_image)
    if spec.control_plane == REAL:
        return start_real_cluster(spec, stack)
    stack.start_control_plane(spec.control_plane, kubelet_deletions=spec.kubelet_deletions)
    kube = stack.kube
    assert kube is not None
    start_nodes(stack, spec, stack.kubeconfig, *(["--finish-deletions"] if spec.kubelet_deletions else []))
    port = free_port()
    stack.service_url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "KUBECONFIG": str(stack.kubeconfig),
        "HAMI_STATE_DIR": str(stack.workdir / "state"),
        "HAMI_REGISTRATION_INTERVAL": "2s",
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
        "HAMI_LOG_LEVEL": spec.log_level,
        "HAMI_BIND": f"127.0.0.1:{port}",
        "HAMI_WORKERS": str(spec.workers),
        "PROMETHEUS_MULTIPROC_DIR": str(stack.workdir / "prometheus"),
        **vendor_env(spec.vendors, stack.workdir),
        **spec.service_env,
    }
    if spec.tls:
        serve_tls(stack, env)
    stack.start("worker", [PY, "-m", "workers"], env)
    service = stack.start("service", [PY, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"], env)
    context = ssl.create_default_context(cafile=str(stack.ca_file)) if stack.ca_file else None
    wait_for_http(f"{stack.service_url}/healthz", timeout=60, process=service, ssl_context=context)
    wait_until(
        "the service to be ready with every node registered",
        lambda: service_ready(stack, spec.nodes),
        90,
        stack,
        0.25,
    )
    if not spec.scheduler:
        return kube
    scheduler = SchedulerSpec(
        name="scheduler",
        config=extender_config(stack.service_url, stack.ca_file, spec.default_scheduler),
        stats=stack.workdir / "scheduler-stats.json",
        sim_options={
            "unschedulable_timeout": spec.unschedulable_timeout,
            "max_unschedulable": spec.max_unschedulable,
        },
    )
    stack.start_scheduler(scheduler)
    return kube
