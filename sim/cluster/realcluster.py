"""The whole stack on the real control plane, configured from our Helm chart (see sim.controlplane.chart).

Start order (each waited for): etcd -> kube-apiserver -> namespaces, the chart's RBAC and the simulated
device plugin's -> simulated GPU nodes and their kubelets, as the device plugin's ServiceAccount user ->
per replica our registration worker and the chart's two Gunicorn servers (`extender`: kube-scheduler's
verbs on loopback, its client certificate required; `webhook`: the public routes), with the chart's
container environments, as the chart's ServiceAccount user, serving the chart's TLS Secrets -> the
chart's MutatingWebhookConfiguration at a loopback URL, probed until it mutates -> per replica the real
kube-scheduler with the chart's KubeSchedulerConfiguration (and client certificate) -> Ready with every
node registered. On request (`sim up`, the demo) the cluster's own kube-scheduler runs beside them, the
`default-scheduler` profile without our extender, so pods that ask for no managed device are placed.

`ChartSetup` keeps what the render produced, so tests and tools can add replicas or schedulers later
(`start_replica`, `start_kube_scheduler`). Replica 0 uses the process names `worker`, `service` (the
public server), `extender` and `scheduler` (the emulator demo's names); replica i > 0 appends `-i`.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3

from sim.cluster.image import image_containers
from sim.cluster.serviceproxy import ServiceProxy
from sim.cluster.spec import ClusterSpec, ExternalExtender
from sim.cluster.stack import (
    DemoFailure,
    Stack,
    free_port,
    service_ready,
    start_nodes,
    vendor_values,
    wait_until,
)
from sim.controlplane import SchedulerSpec, chart
from sim.controlplane.base import (
    DEFAULT_SCHEDULER,
    DEVICE_PLUGIN,
    EXTENDER,
    KUBE_SCHEDULER,
    RELEASE_NAMESPACE,
)
from sim.kit.kube import Kube, KubeError, pool_manager
from sim.kit.processes import wait_for_http
from sim.workload.mix import NAMESPACES

PY = sys.executable
KUBELET_API_RETRIES = 60  # the simulated kubelets' retries of an API call (`sim nodes --api-retries`)


@dataclass(frozen=True)
class ChartSetup:
    objects: tuple[dict[str, Any], ...]
    tls: chart.TlsFiles
    client: chart.TlsFiles  # kube-scheduler's client certificate and the CA the extender requires
    device_config: Path
    leader_mode: str


def replica_suffix(index: int) -> str:
    return "" if index == 0 else f"-{index}"


def pod_name(index: int) -> str:
    """The replica's pod name: kube-scheduler's host name in its own UTS namespace (root), else this
    machine's host name (one replica only: every kube-scheduler would carry it)."""
    if os.geteuid() == 0:
        return f"hami-scheduler-{index}"
    return socket.gethostname()


def install_chart(stack: Stack, values: Mapping[str, Any], rbac: bool = True) -> ChartSetup:
    """Render the chart, create the namespaces and (with `rbac`; the emulator has no RBAC API) the RBAC
    objects, write the TLS and device-config files."""
    assert stack.kube is not None
    try:
        objects = tuple(chart.render(values))
        chart.ensure_namespaces(stack.kube, [RELEASE_NAMESPACE, *NAMESPACES])
        if rbac:
            roles = [o for o in objects if o["kind"] in chart.RBAC_KINDS]
            chart.apply(stack.kube, [*roles, *chart.DEVICE_PLUGIN_RBAC])
    except (chart.ChartError, KubeError) as exc:
        raise DemoFailure(f"installing the chart's objects failed: {exc}") from None
    tls = chart.write_tls(objects, stack.workdir / "tls")
    client = chart.write_tls(objects, stack.workdir / "kube-scheduler-client", "-kube-scheduler-client")
    device_config = stack.workdir / "device-config.yaml"
    device_config.write_text(chart.device_config(objects))
    stack.ca_file = tls.ca
    stack.http.clear()
    # the harness reads /debug/state as kube-scheduler would reach it: with its client certificate
    stack.http = pool_manager(8, tls.ca_pem, timeout=30.0, client_cert=(str(client.cert), str(client.key)))
    mode = str((values.get("leaderElection") or {}).get("mode") or "follow")
    return ChartSetup(objects, tls, client, device_config, mode)


def start_replica(
    stack: Stack,
    setup: ChartSetup,
    index: int,
    workers: int,
    service_env: Mapping[str, str] | None = None,
    gunicorn_config: str = "config/gunicorn.conf.py",
    node: str = "",
) -> str:
    """Our registration worker and the chart's two Gunicorn servers of replica `index` (`gunicorn_config`:
    the benchmark's adds request timing; as the pod on `node`, if given: NODE_NAME, so it hands over when
    that node is cordoned); returns the public server's URL once both answer (the extender's is
    `stack.extender_urls[url]`). Both listen on loopback: the harness has no pod network; the extender
    requires kube-scheduler's client certificate as in the chart. The public server runs one worker (the
    chart's two only cost CPU here)."""
    assert stack.control_plane is not None
    suffix, name = replica_suffix(index), pod_name(index)
    extender_port, public_port = free_port(), free_port()
    local = {
        "KUBECONFIG": str(stack.control_plane.kubeconfig_for(EXTENDER)),
        "HAMI_DEVICE_CONFIG_FILE": str(setup.device_config),
        "HAMI_STATE_DIR": str(stack.workdir / f"state{suffix}"),
        "HAMI_REGISTRATION_INTERVAL": "2s",  # the chart's 15s only slows the start of a short run
        "HAMI_LOG_LEVEL": "WARNING",
        "HAMI_TLS_CERT_FILE": str(setup.tls.cert),
        "HAMI_TLS_KEY_FILE": str(setup.tls.key),
    }
    extender_metrics = str(stack.workdir / f"prometheus-extender{suffix}")
    extender = {
        **os.environ,
        **chart.container_env(setup.objects, "extender", name, RELEASE_NAMESPACE, node),
        **local,
        "HAMI_BIND": f"127.0.0.1:{extender_port}",
        "HAMI_WORKERS": str(workers),
        "HAMI_TLS_CLIENT_CA_FILE": str(setup.client.ca),
        "PROMETHEUS_MULTIPROC_DIR": extender_metrics,
        **(service_env or {}),
    }
    public = {
        **os.environ,
        **chart.container_env(setup.objects, "webhook", name, RELEASE_NAMESPACE, node),
        **local,
        "HAMI_BIND": f"127.0.0.1:{public_port}",
        "HAMI_WORKERS": "1",
        "HAMI_EXTENDER_ADDRESS": f"127.0.0.1:{extender_port}",
        "HAMI_EXTENDER_METRICS_DIR": extender_metrics,
        "PROMETHEUS_MULTIPROC_DIR": str(stack.workdir / f"prometheus{suffix}"),
        **(service_env or {}),
    }
    worker = {
        **os.environ,
        **chart.container_env(setup.objects, "worker", name, RELEASE_NAMESPACE, node),
        **local,
        "HAMI_WORKER_METRICS_BIND": "127.0.0.1:0",
        "PROMETHEUS_MULTIPROC_DIR": str(stack.workdir / f"prometheus-worker{suffix}"),
        **(service_env or {}),
    }
    if stack.image is not None:  # the chart's containers from the built image (sim.cluster.image)
        if gunicorn_config != "config/gunicorn.conf.py":
            raise DemoFailure(f"--from-image runs the image's Gunicorn configuration, not {gunicorn_config}")
        binds = {"extender": extender, "webhook": public, "worker": worker}
        argvs = image_containers(stack, setup, suffix, name, node, binds, service_env or {})
        stack.start(f"worker{suffix}", argvs["worker"])
        extender_process = stack.start(f"extender{suffix}", argvs["extender"])
        process = stack.start(f"service{suffix}", argvs["webhook"])
    else:
        for env in (extender, public, worker):
            Path(env["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
        stack.start(f"worker{suffix}", [PY, "-m", "workers"], worker)
        gunicorn = [PY, "-m", "gunicorn", "-c", gunicorn_config, "wsgi:app"]
        extender_process = stack.start(f"extender{suffix}", gunicorn, extender)
        process = stack.start(f"service{suffix}", gunicorn, public)
    url, extender_url = f"https://127.0.0.1:{public_port}", f"https://127.0.0.1:{extender_port}"
    context = ssl.create_default_context(cafile=str(setup.tls.ca))
    context.load_cert_chain(str(setup.client.cert), str(setup.client.key))
    wait_for_http(f"{extender_url}/healthz", timeout=60, process=extender_process, ssl_context=context)
    wait_for_http(f"{url}/healthz", timeout=60, process=process, ssl_context=context)
    stack.extender_urls[url] = extender_url
    return url


def register_webhook(stack: Stack, setup: ChartSetup, url: str) -> None:
    """The chart's MutatingWebhookConfiguration at `url`, waited for until the API server calls it."""
    assert stack.kube is not None
    try:
        chart.apply(stack.kube, [chart.webhook_configuration(setup.objects, f"{url}/webhook")])
        chart.wait_for_webhook(stack.kube, NAMESPACES[0], "hami-scheduler")
    except (chart.ChartError, KubeError) as exc:
        raise DemoFailure(f"registering the webhook failed: {exc}") from None


def services(stack: Stack, setup: ChartSetup) -> tuple[str, str]:
    """The extender URL kube-scheduler calls and the webhook's: with one replica in follow mode the
    replica's own servers; otherwise loopback stand-ins for the chart's Services (`sim.cluster.serviceproxy`):
    the main one routes to the Ready replica (the leader), the webhook one to every live replica
    (publishNotReadyAddresses)."""
    if len(stack.replica_urls) == 1 and setup.leader_mode != "acquire":
        return stack.extender_urls[stack.replica_urls[0]], stack.replica_urls[0]
    # the main Service's `extender` port: to the Ready replica's extender server
    main = ServiceProxy(stack.replica_urls, str(setup.tls.ca), targets=stack.extender_urls).start()
    webhook = ServiceProxy(stack.replica_urls, str(setup.tls.ca), probe="/healthz").start()
    stack.closers += [main.stop, webhook.stop]
    return main.url, webhook.url


def leader_url(stack: Stack, nodes: int) -> str | None:
    """The replica that is Ready with every node registered, if one is."""
    for url in stack.replica_urls:
        stack.service_url = url
        try:
            if service_ready(stack, nodes):
                return url
        except (OSError, ValueError, urllib3.exceptions.HTTPError):
            continue
    return None


def ready_replicas(stack: Stack) -> list[int]:
    """The indexes of the replicas whose /readyz answers 200 (the leader, with leader-only readiness)."""
    ready = []
    for index, url in enumerate(stack.replica_urls):
        try:
            if stack.http.request("GET", f"{url}/readyz", retries=False, timeout=2.0).status == 200:
                ready.append(index)
        except (OSError, urllib3.exceptions.HTTPError):  # a stopped replica refuses the connection
            continue
    return ready


def start_kube_scheduler(
    stack: Stack, setup: ChartSetup, index: int, extender_url: str, qps: int = 0, ca_file: str = ""
) -> None:
    """The real kube-scheduler of replica `index` with the chart's configuration at `extender_url` (empty:
    no extender); `qps` > 0 sets clientConnection qps/burst (as scheduler_perf does)."""
    config = chart.scheduler_configuration(
        setup.objects, extender_url, Path(ca_file) if ca_file else setup.tls.ca, setup.client
    )
    if not extender_url:
        config.pop("extenders", None)
    if qps > 0:
        config["clientConnection"] = {"qps": qps, "burst": qps * 2}
    spec = SchedulerSpec(name=f"scheduler{replica_suffix(index)}", config=config, hostname=pod_name(index))
    stack.start_scheduler(spec)


def start_default_scheduler(stack: Stack) -> None:
    """The cluster's own kube-scheduler: the `default-scheduler` profile only, no extender, as the user
    system:kube-scheduler (the bootstrap RBAC's), one instance without leader election. A process of its
    own rather than a second profile of the chart's sidecar: a KubeSchedulerConfiguration's extenders apply
    to every profile, and the sidecar (run from the same chart configuration in users' clusters) must never
    act as a cluster's default scheduler; killing or restarting our replicas leaves it running, as a
    cluster's scheduler is."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": DEFAULT_SCHEDULER}],
    }
    stack.start_scheduler(SchedulerSpec(name=DEFAULT_SCHEDULER, config=config, user=KUBE_SCHEDULER))


def start_real_cluster(spec: ClusterSpec, stack: Stack) -> Kube:
    """The stack of `sim.cluster.build.build` on the real control plane, with the spec's chart values
    (`replicas`: that many replicas, each with its own kube-scheduler as the chart deploys them;
    `leaderElection.mode`; replica i as the pod on `spec.replica_nodes[i]` when given, see
    sim.cluster.replicapods). Without a scheduler leader election is off (in follow mode nothing else would
    make a replica the leader). `stack.service_url` ends as the leader's URL. With `spec.external`, none of
    ours runs: the control plane, the nodes and one kube-scheduler at the given extender.
    `spec.default_scheduler`: the cluster's own kube-scheduler as well (`start_default_scheduler`)."""
    values = {**vendor_values(spec.vendors), **spec.chart_values}
    stack.start_control_plane(
        "real", workload_api=spec.workload_api, controller_manager=spec.controller_manager
    )
    assert stack.kube is not None and stack.control_plane is not None
    setup = install_chart(stack, values)
    # the simulated kubelets' and plugins' API calls ride out a kube-apiserver restart (~60 s of retries, a
    # 403 included: the restarted server denies until its authorizers have synced):
    # a real plugin's Allocate in the outage fails the pod whatever the scheduler did (docs/chaos.md)
    kubelet = ["--finish-deletions", "--api-retries", str(KUBELET_API_RETRIES), "--retry-forbidden"]
    external = spec.external
    if external is not None and not external.url:  # no extender: the stock NVIDIA plugin's behaviour
        kubelet.append("--stock-gpus")
    start_nodes(stack, spec, stack.control_plane.kubeconfig_for(DEVICE_PLUGIN), *kubelet)
    if spec.default_scheduler:
        start_default_scheduler(stack)
    if external is not None:
        start_external(stack, setup, external, spec.scheduler, spec.scheduler_qps)
        return stack.kube
    env = {"HAMI_LOG_LEVEL": spec.log_level, **spec.service_env}
    if not spec.scheduler:
        env.setdefault("HAMI_LEADER_ELECT", "false")
    replicas = int(values.get("replicas") or 1)
    nodes = [*spec.replica_nodes, *[""] * replicas][:replicas]
    stack.replica_urls = [
        start_replica(stack, setup, i, spec.workers, env, node=node) for i, node in enumerate(nodes)
    ]
    stack.service_url = stack.replica_urls[0]
    extender, webhook = services(stack, setup)
    register_webhook(stack, setup, webhook)
    if spec.scheduler:
        for index, url in enumerate(stack.replica_urls):
            # follow: the sidecar calls its own pod's extender; acquire: the Service (the leader)
            target = extender if setup.leader_mode == "acquire" else stack.extender_urls[url]
            start_kube_scheduler(stack, setup, index, target, spec.scheduler_qps)
    wait_until(
        "a replica to be ready with every node registered",
        lambda: leader_url(stack, spec.nodes) is not None,
        120,
        stack,
        0.25,
    )
    return stack.kube


def start_external(
    stack: Stack, setup: ChartSetup, external: ExternalExtender, scheduler: bool, qps: int
) -> None:
    """Register `external`'s webhook (the chart's configuration, its URL and CA) and start kube-scheduler."""
    assert stack.kube is not None
    if external.webhook_url:
        hook = chart.webhook_configuration(setup.objects, external.webhook_url)
        if external.webhook_ca:
            ca = base64.b64encode(Path(external.webhook_ca).read_bytes()).decode()
            for webhook in hook["webhooks"]:
                webhook["clientConfig"]["caBundle"] = ca
        try:
            chart.apply(stack.kube, [hook])
            chart.wait_for_webhook(stack.kube, NAMESPACES[0], external.scheduler_name)
        except (chart.ChartError, KubeError) as exc:
            raise DemoFailure(f"registering the external webhook failed: {exc}") from None
    if scheduler:
        config = external_scheduler_config(setup, external)
        if qps > 0:
            config["clientConnection"] = {"qps": qps, "burst": qps * 2}
        stack.start_scheduler(SchedulerSpec(name="scheduler", config=config, hostname=pod_name(0)))


def external_scheduler_config(setup: ChartSetup, external: ExternalExtender) -> dict[str, Any]:
    """The chart's KubeSchedulerConfiguration pointed at `external` (no extender when its url is empty):
    its CA (or `insecure`), HTTPS by the URL's scheme, its scheduler name."""
    config = chart.scheduler_configuration(setup.objects, external.url, Path(external.ca_file or "."))
    if not external.url:
        config.pop("extenders", None)
    for extender in config.get("extenders") or []:
        if not external.ca_file:
            extender["tlsConfig"] = {"insecure": True}
        else:
            extender["tlsConfig"].pop("serverName", None)
        extender["enableHTTPS"] = external.url.startswith("https://")
    for profile in config.get("profiles") or []:
        profile["schedulerName"] = external.scheduler_name
    return config


def kill_replica(stack: Stack, index: int) -> list[int]:
    """SIGKILL replica `index` as a node failure kills a pod: its worker, its Gunicorns (process groups, so
    the workers too) and its kube-scheduler. Returns the PIDs killed."""
    suffix = replica_suffix(index)
    targets = {**stack.all_processes()}
    killed = []
    names = (f"scheduler{suffix}", f"extender{suffix}", f"service{suffix}", f"worker{suffix}")
    for name in names:
        process = targets.get(name)
        if process is not None and process.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            killed.append(process.pid)
    for name in names:
        if name in targets:
            targets[name].stop(timeout=5)  # reaps
    return killed
