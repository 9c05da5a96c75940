"""Start a whole cluster on either control plane: `start_cluster` (what the demo, `sim up`, the fuzzer and
the harness call).

Emulator: the API emulator, the simulated GPU nodes (`python -m sim nodes`), the registration worker
(`python -m workers`), our service (`gunicorn -c config/gunicorn.conf.py wsgi:app`, Ready with every node
registered) and the simulated kube-scheduler (`python -m sim scheduler`), each waited for. Real: the same
cluster configured from our chart on etcd + kube-apiserver + kube-scheduler (`sim.cluster.realcluster`). Every
process is a child of the `Stack`, which stops them all by PID.
"""

from __future__ import annotations

import argparse
import os
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sim.cluster.realcluster import ExternalExtender, start_real_cluster
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


def start_cluster(
    args: argparse.Namespace,
    stack: Stack,
    *,
    scheduler: bool = True,
    service_env: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
    external: ExternalExtender | None = None,
    scheduler_qps: int = 0,
    replica_nodes: Sequence[str] = (),
    default_scheduler: bool = False,
) -> Kube:
    """Control plane, nodes, worker, service (waited for until Ready with every node) and scheduler.

    `args` needs: nodes, seed, gpus_per_node, zones, allocate_latency, workers, tls, unschedulable_timeout,
    max_unschedulable (the demo's options), and optionally control_plane ("emulator", the default, or
    "real": then `sim.cluster.realcluster` builds the cluster from our chart). `scheduler=False` leaves the
    kube-scheduler out (the caller plays it); `service_env` adds to or overrides the worker's and the
    service's environment; `values` are the chart's values, `external` an extender the harness did not
    start, `scheduler_qps` kube-scheduler's client rate, `replica_nodes` the nodes of the replicas' pods (real
    control plane only; see sim.cluster.realcluster), `default_scheduler` the cluster's own
    `default-scheduler` too (`sim up`, the demo: pods that ask for no managed device are placed as in any
    cluster; real: a second kube-scheduler process, emulator: a second profile of the simulated one). The API
    client returned is also `stack.kube`.
    """
    if getattr(args, "control_plane", "emulator") == "real":
        return start_real_cluster(
            args,
            stack,
            scheduler=scheduler,
            service_env=service_env,
            values=values,
            external=external,
            scheduler_qps=scheduler_qps,
            replica_nodes=replica_nodes,
            default_scheduler=default_scheduler,
        )
    if external is not None:
        raise DemoFailure("an external extender needs the real control plane (--control-plane real)")
    stack.start_control_plane("emulator", workload_api=bool(getattr(args, "workload_api", False)))
    kube = stack.kube
    assert kube is not None
    start_nodes(stack, args, stack.kubeconfig)
    port = free_port()
    stack.service_url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "KUBECONFIG": str(stack.kubeconfig),
        "HAMI_STATE_DIR": str(stack.workdir / "state"),
        "HAMI_REGISTRATION_INTERVAL": "2s",
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
        "HAMI_LOG_LEVEL": "WARNING",
        "HAMI_BIND": f"127.0.0.1:{port}",
        "HAMI_WORKERS": str(args.workers),
        "PROMETHEUS_MULTIPROC_DIR": str(stack.workdir / "prometheus"),
        **vendor_env(getattr(args, "vendors", "nvidia"), stack.workdir),
        **(service_env or {}),
    }
    if args.tls:
        serve_tls(stack, env)
    stack.start("worker", [PY, "-m", "workers"], env)
    service = stack.start("service", [PY, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"], env)
    context = ssl.create_default_context(cafile=str(stack.ca_file)) if stack.ca_file else None
    wait_for_http(f"{stack.service_url}/healthz", timeout=60, process=service, ssl_context=context)
    wait_until(
        "the service to be ready with every node registered",
        lambda: service_ready(stack, args.nodes),
        90,
        stack,
        0.25,
    )
    if not scheduler:
        return kube
    spec = SchedulerSpec(
        name="scheduler",
        config=extender_config(stack.service_url, stack.ca_file, default_scheduler),
        stats=stack.workdir / "scheduler-stats.json",
        sim_options={
            "unschedulable_timeout": args.unschedulable_timeout,
            "max_unschedulable": args.max_unschedulable,
        },
    )
    stack.start_scheduler(spec)
    return kube
