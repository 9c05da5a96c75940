"""What cluster to start: `ClusterSpec`, the one description `sim.cluster.build.build` starts a cluster from.

Every caller describes its cluster here and nowhere else: the command-line entry points (`sim demo`, `sim
up`, `sim fuzz`, `sim chaos --control-plane real`) convert their parsed arguments with `ClusterSpec.of`
(argparse stays in them), the harness (`sim.cluster.harness.running_cluster`) and the test fixtures build
one directly. A spec is frozen and plain data: it starts nothing, and a combination the builder cannot
honour (an image or the Workload API on the emulator) is refused by `problem` before any process starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

EMULATOR, REAL = "emulator", "real"


@dataclass(frozen=True)
class ExternalExtender:
    """Drive an extender (and webhook) this harness did not start, e.g. another HAMi-compatible one: the
    chart's KubeSchedulerConfiguration pointed at `url` (empty: kube-scheduler without any extender, the
    benchmark's baseline), the chart's webhook registration pointed at `webhook_url` (empty: none)."""

    url: str = ""
    ca_file: str = ""  # tlsConfig.caFile for an https url; empty: tlsConfig.insecure
    webhook_url: str = ""  # e.g. https://127.0.0.1:9443/webhook
    webhook_ca: str = ""  # PEM file for the webhook's caBundle
    scheduler_name: str = "hami-scheduler"


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster: its control plane, its nodes, our processes and the schedulers in front of them."""

    # the control plane: "emulator" (sim.emulator) or "real" (etcd + kube-apiserver, set up from the chart)
    control_plane: str = EMULATOR
    workload_api: bool = False  # real, Kubernetes >= 1.37: the Workload API, gang scheduling (docs/gangs.md)
    # real: kube-controller-manager with the controllers sim.controlplane.controllermanager lists (budget
    # status, namespace deletion, garbage collection, quota status); off only for a scenario that needs so
    controller_manager: bool = True
    # the simulated GPU nodes (`python -m sim nodes`; sim.nodes.vendors for the node kinds)
    nodes: int = 4
    gpus_per_node: int = 8
    mig_nodes: int = 0
    zones: int = 2
    vendors: str = "nvidia"
    seed: int = 0
    allocate_latency: float = 0.002
    # graceful deletion (sim.nodes.kubelet): a terminating Running pod keeps running, devices held, for its
    # grace period times grace_scale, at most grace_cap seconds; then its kubelet deletes it with grace 0
    grace_scale: float = 1.0
    grace_cap: float = 10.0
    # emulator: leave graceful pod deletions to the simulated kubelets as kube-apiserver does (grace_scale
    # then applies there too); off, the emulator ends them itself after its --pod-deletion-delay (1 s).
    # The real control plane always leaves them to the kubelets.
    kubelet_deletions: bool = False
    # our processes: from this checkout, or (real) the chart's containers from a built image (`from_image`)
    from_image: str = ""
    workers: int = 2  # Gunicorn workers (HAMI_WORKERS)
    tls: bool = True  # emulator: serve HTTPS with a throwaway CA (the chart's servers always do)
    service_env: Mapping[str, str] = field(default_factory=dict)  # added to our processes' environment
    # our processes' HAMI_LOG_LEVEL: WARNING where noise costs (tests, the demo); `sim up` says INFO, so the
    # one-line-per-decision log (docs/metrics.md) is there
    log_level: str = "WARNING"
    # real: the chart's values (`replicas`, `leaderElection`, ...), merged over the vendors' devices values
    chart_values: Mapping[str, Any] = field(default_factory=dict)
    replica_nodes: tuple[str, ...] = ()  # real: replica i runs as the pod on node i (sim.cluster.replicapods)
    # the schedulers: without `scheduler` the caller plays kube-scheduler itself
    scheduler: bool = True
    default_scheduler: bool = False  # the cluster's own `default-scheduler` too (`sim up`, the demo)
    scheduler_qps: int = 0  # real: kube-scheduler clientConnection qps (burst 2x); 0: the default
    unschedulable_timeout: float = 5.0  # simulated scheduler only
    max_unschedulable: int = 5  # simulated scheduler only
    external: ExternalExtender | None = None  # real: drive an extender/webhook the harness did not start

    @classmethod
    def of(cls, settings: Mapping[str, Any], **overrides: Any) -> ClusterSpec:
        """The spec from a command's settings (`vars(args)`): every key that names a field, then `overrides`;
        the fields a command has no option for keep their defaults."""
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in settings.items() if k in names}, **overrides})

    def problem(self) -> str:
        """Why this cluster cannot be built ("" when it can)."""
        if self.grace_scale < 0 or self.grace_cap < 0:
            return "grace_scale and grace_cap must not be negative"
        if self.control_plane == REAL:
            return ""
        if self.workload_api:
            return "workload_api needs the real control plane (the emulator has no Workload API)"
        if self.from_image:
            return "from_image needs the real control plane (the chart's containers run against it)"
        if self.external is not None:
            return "an external extender needs the real control plane (--control-plane real)"
        return ""
