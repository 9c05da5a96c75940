"""`python -m bench --control-plane real`: the scheduler_perf-style benchmark on the real control plane.

One cluster (etcd, kube-apiserver, the simulated GPU nodes and kubelets, our registration worker and
Gunicorn configured from the chart, the chart's webhook) and one pod stream (`--pods` pods asking only
`nvidia.com/gpu` counts), scheduled three times by the real kube-scheduler, one run after the other on the
emptied cluster, each by a fresh kube-scheduler process with the chart's KubeSchedulerConfiguration,
`clientConnection.qps/burst` raised (as scheduler_perf does) and leader election off:

- `baseline`: no extender; NodeResourcesFit counts `nvidia.com/gpu` (GPUs x split count per node); the
  simulated kubelets start the pods as NVIDIA's stock plugin would (`sim nodes --stock-gpus`);
- `noop`: the chart's extender entry with `filterVerb: bench/noop`, no `bindVerb` nor `preemptVerb`: the
  floor, an extender answering without work on the very HTTP path of /filter (same Gunicorn, TLS, body
  decoding);
- `extender`: the chart's extender, our /filter and /bind, the pods created through our webhook.

Each run creates its pods first (schedulerName `bench-baseline` / `bench-noop`, which our webhook leaves
alone; unset for `extender`, which the webhook sets), then starts its kube-scheduler — or, with an arrival
rate (latency mode, bench/arrival.py), starts its kube-scheduler and then creates the pods at that rate.
The window is from the first pod bound to the last (a watch on the pods), so kube-scheduler's start-up is
not in it; CPU per process (`/proc/<pid>/stat`) is sampled at those two moments. See bench/schedmetrics.py
for the latencies. Every run then waits for its pods to be Running; kube-apiserver's request counters,
scraped before the pods are created and after that, give the API requests per scheduled pod
(bench/apicounts.py; the driver's own requests are counted on its side and left out).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import apicounts, arrival, procs, real_after, real_external, real_summary, schedmetrics
from sim.cluster.realcluster import (
    ChartSetup,
    external_scheduler_config,
    install_chart,
    leader_url,
    pod_name,
    register_webhook,
    start_replica,
)
from sim.cluster.spec import ClusterSpec, ExternalExtender
from sim.cluster.stack import Stack, start_nodes, wait_until
from sim.controlplane import SchedulerSpec, chart
from sim.controlplane.base import DEVICE_PLUGIN
from sim.controlplane.real import RealControlPlane
from sim.kit import podutil
from sim.kit.informer import Informer
from sim.kit.kube import Kube, KubeError, node_path, pod_path
from sim.nodes.objects import build_cluster, node_object

Obj = dict[str, Any]
NAMESPACE = "default"
PHASE_LABEL = "bench.hami.io/phase"
PHASES = real_summary.PHASES
SCHEDULER_NAMES = {"baseline": "bench-baseline", "noop": "bench-noop", "extender": ""}


@dataclass(frozen=True)
class RealOptions:
    nodes: int = 1000
    gpus_per_node: int = 8
    pods: int = 300
    seed: int = 0
    workers: int = 2
    threads: int = 0  # HAMI_THREADS (0: the service's default, 4)
    zones: int = 3
    qps: int = 5000  # kube-scheduler clientConnection qps (burst 2x), as scheduler_perf
    allocate_latency: float = 0.002
    registration_interval: str = "15s"  # the chart's default
    stall: float = 120.0  # a run ends when no pod was bound for this long
    settle: float = 120.0  # seconds for the extender run's pods to be Running (Allocate done)
    profile: bool = False  # pyinstrument per request in the service: figures are then no results
    node_policy: str = ""  # the chart's defaultSchedulerPolicy.nodeSchedulerPolicy ("": its binpack)
    external: ExternalExtender | None = None  # an extender (and webhook) this harness does not start
    external_start: str = ""  # a shell command starting it, with KUBECONFIG set (bench/real_external.py)
    external_wait: float = 600.0  # seconds for the external extender to accept connections
    arrival_rate: float = 0.0  # pods per second created while kube-scheduler runs (0: all before it starts)


def phases_of(options: RealOptions) -> tuple[str, ...]:
    """The runs: without an extender, the no-op floor (our service's verb: not for an outside extender)
    and the extender."""
    return ("baseline", "extender") if options.external is not None else PHASES


def load_average() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def pod_stream(count: int, seed: int, phase: str, scheduler_name: str = "") -> list[Obj]:
    """The same `count` pods for every run (1 GPU, every fifth 2 GPUs, drawn from `seed`); the extender
    run's pods get `scheduler_name` (when no webhook sets it)."""
    rng = random.Random(seed)
    pods = []
    for index in range(count):
        gpus = 2 if rng.random() < 0.2 else 1
        spec: Obj = {
            "containers": [
                {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
            "terminationGracePeriodSeconds": 0,
        }
        if SCHEDULER_NAMES[phase] or scheduler_name:
            spec["schedulerName"] = SCHEDULER_NAMES[phase] or scheduler_name
        meta = {"name": f"bench-{phase}-{index:05d}", "namespace": NAMESPACE, "labels": {PHASE_LABEL: phase}}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return pods


def scheduler_config(cluster: Cluster, phase: str) -> Obj:
    """The chart's KubeSchedulerConfiguration for one run (see the module docstring), at our service or
    at the outside extender."""
    setup, options = cluster.setup, cluster.options
    if options.external is not None:
        config = external_scheduler_config(setup, options.external)
    else:
        config = chart.scheduler_configuration(
            setup.objects, cluster.extender_url, setup.tls.ca, setup.client
        )
    config["leaderElection"] = {"leaderElect": False}
    config["clientConnection"] = {"qps": options.qps, "burst": 2 * options.qps}
    if phase == "baseline":
        config.pop("extenders", None)
    if phase == "noop":
        for extender in config.get("extenders") or []:
            extender["filterVerb"] = "bench/noop"
            extender.pop("bindVerb", None)
            extender.pop("preemptVerb", None)  # the floor: nothing of ours but the filter's HTTP path
    if SCHEDULER_NAMES[phase]:
        for profile in config.get("profiles") or []:
            profile["schedulerName"] = SCHEDULER_NAMES[phase]
    return config


def _parallel(work: Callable[[Any], object], items: list[Any], threads: int = 8) -> None:
    with ThreadPoolExecutor(threads, thread_name_prefix="bench-api") as executor:
        list(executor.map(work, items))


def register_nodes(kube: Kube, options: RealOptions) -> None:
    """The Node objects as kubelets and HAMi's device plugin leave them, created in parallel (what `sim
    nodes` does serially); the kubelets then run with `--no-register`."""
    cluster = build_cluster(
        options.nodes, seed=options.seed, gpus_per_node=options.gpus_per_node, zones=options.zones
    )

    def create(node: Obj) -> None:
        try:
            kube.create(node_path(), {k: v for k, v in node.items() if k != "status"})
        except KubeError as exc:
            if exc.status != 409:
                raise
        kube.patch(node_path(node["metadata"]["name"], "status"), {"status": node["status"]})

    _parallel(create, [node_object(spec) for spec in cluster.nodes])


@dataclass
class Cluster:
    stack: Stack
    setup: ChartSetup
    options: RealOptions
    timing_dir: Path
    startup_s: float
    extender_url: str  # kube-scheduler's verbs: our extender server, or the outside extender's URL
    metrics_url: str  # our service's /metrics ("": an outside extender, not scraped)


def start(stack: Stack, options: RealOptions, say: Callable[[str], None]) -> Cluster:
    """The whole stack without any kube-scheduler (each run starts its own)."""
    began = time.perf_counter()
    stack.start_control_plane("real")
    assert stack.kube is not None and stack.control_plane is not None
    policy = {"nodeSchedulerPolicy": options.node_policy} if options.node_policy else {}
    setup = install_chart(stack, {"defaultSchedulerPolicy": policy} if policy else {})
    register_nodes(stack.kube, options)
    say(f"  {options.nodes} nodes created after {time.perf_counter() - began:.1f}s")
    nodes = ClusterSpec.of(vars(options))  # its nodes, seed, GPUs, zones and Allocate latency
    kubeconfig = stack.control_plane.kubeconfig_for(DEVICE_PLUGIN)
    start_nodes(stack, nodes, kubeconfig, "--no-register", "--finish-deletions", "--stock-gpus", timeout=300)
    timing_dir = stack.workdir / "timing"
    if options.external is not None:
        real_external.start(
            stack, setup, options.external, options.external_start, options.external_wait, say
        )
        startup = time.perf_counter() - began
        say(f"  stack ready after {startup:.1f}s (outside extender at {options.external.url})")
        return Cluster(stack, setup, options, timing_dir, startup, options.external.url, "")
    env = {
        "HAMI_LEADER_ELECT": "false",  # one replica, no kube-scheduler to follow between the runs
        "HAMI_BENCH_NOOP": "1",
        "HAMI_BENCH_TIMING_DIR": str(timing_dir),
        "HAMI_REGISTRATION_INTERVAL": options.registration_interval,
    }
    if options.threads:
        env["HAMI_THREADS"] = str(options.threads)
    if options.profile:
        env["HAMI_BENCH_PROFILE_DIR"] = str(stack.workdir / "profile")
    url = start_replica(stack, setup, 0, options.workers, env, "bench/gunicorn_timing.py")
    stack.replica_urls, stack.service_url = [url], url
    register_webhook(stack, setup, url)
    wait_until(
        "our service ready with every node registered",
        lambda: leader_url(stack, options.nodes) is not None,
        900,
        stack,
        1.0,
    )
    startup = time.perf_counter() - began
    say(f"  stack ready after {startup:.1f}s")
    extender = stack.extender_urls.get(url, url)  # kube-scheduler's verbs
    return Cluster(stack, setup, options, timing_dir, startup, extender, f"{url}/metrics")


def _cpu_groups(stack: Stack, scheduler: str) -> dict[str, list[int]]:
    processes = stack.all_processes()
    groups = {
        "kube-scheduler": [processes[scheduler].pid],
        "kube-apiserver": [processes["kube-apiserver"].pid],
        "etcd": [processes["etcd"].pid],
        "nodes": [processes["nodes"].pid],
    }
    if "service" in processes:  # both Gunicorn servers of the chart's pod (the extender does the work)
        service, extender = processes["service"].pid, processes["extender"].pid
        groups["service"] = [service, *procs.children(service), extender, *procs.children(extender)]
        groups["worker"] = [processes["worker"].pid]
    if real_external.PROCESS in processes:  # what --external-start started, with its children
        outside = processes[real_external.PROCESS].pid
        groups["external"] = [outside, *procs.descendants(outside)]
    return groups


class _Binds:
    """Watches the run's pods: when each got its node, and CPU samples at the first and the last."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.at: dict[str, float] = {}
        self.groups: dict[str, list[int]] = {}
        self.first_cpu: dict[str, float] = {}
        self.last_cpu: dict[str, float] = {}
        self.first_wall = 0.0

    def seen(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if kind == "DELETED" or not podutil.node_name(obj) or podutil.key(obj) in self.at:
            return
        if not self.at:
            self.first_cpu, self.first_wall = procs.cpu_sample(self.groups), time.time()
        self.at[podutil.key(obj)] = time.perf_counter()
        if len(self.at) == self.expected:
            self.last_cpu = procs.cpu_sample(self.groups)


def _extender_scheduler_name(external: ExternalExtender | None) -> str:
    if external is None:
        return "hami-scheduler (set by our webhook)"
    how = "set by its webhook" if external.webhook_url else "set by the harness"
    return f"{external.scheduler_name} ({how})"


def run_phase(cluster: Cluster, phase: str, say: Callable[[str], None]) -> Obj:
    """One run: create the pods and start its kube-scheduler (saturated: the pods first; with an arrival
    rate: the scheduler first, then the pods at that rate), wait until every pod is bound (or no progress
    for `stall` seconds), read the metrics, stop the scheduler, wait for the pods to run, count the API
    requests of the run."""
    stack, options = cluster.stack, cluster.options
    assert stack.kube is not None and isinstance(stack.control_plane, RealControlPlane)
    load_start = load_average()
    external = options.external
    name_without_webhook = external.scheduler_name if external and not external.webhook_url else ""
    manifests = pod_stream(options.pods, options.seed, phase, name_without_webhook)
    binds = _Binds(len(manifests))
    kube = apicounts.CountingKube(stack.kube)  # the driver's requests, counted (bench/apicounts.py)
    api_before = kube.scrape()
    informer = Informer(
        kube, pod_path(NAMESPACE), binds.seen, f"bench-{phase}", labelSelector=f"{PHASE_LABEL}={phase}"
    ).start()

    def create(pod: Obj) -> Obj:
        return kube.create(pod_path(NAMESPACE), pod)

    created_at = time.perf_counter()
    if not options.arrival_rate:
        _parallel(create, manifests, threads=4)
    created_s = time.perf_counter() - created_at
    ours_url, ca = cluster.metrics_url, str(cluster.setup.tls.ca)
    ours_before = schedmetrics.scrape(ours_url, schedmetrics.OURS, ca) if ours_url else {}
    name = f"scheduler-{phase}"
    config = scheduler_config(cluster, phase)
    started_wall, started = time.time(), time.perf_counter()
    process = stack.start_scheduler(SchedulerSpec(name=name, config=config, hostname=pod_name(0)))
    binds.groups = _cpu_groups(stack, name)
    arrivals = None
    if options.arrival_rate:
        schedmetrics.wait_ready(stack.control_plane.scheduler_urls[name])
        arrivals = arrival.Arrivals(create, manifests, options.arrival_rate).start()
        say(
            f"  {phase}: kube-scheduler pid {process.pid}; {len(manifests)} pods arriving at"
            f" {options.arrival_rate:g}/s"
        )
    else:
        say(f"  {phase}: {len(manifests)} pods created in {created_s:.1f}s; kube-scheduler pid {process.pid}")
    last_count, last_progress = 0, time.monotonic()
    while len(binds.at) < len(manifests) and time.monotonic() - last_progress < options.stall:
        stack.check()
        progress = len(binds.at) + (arrivals.created() if arrivals else 0)
        if arrivals:
            arrivals.check()
        if progress != last_count:
            last_count, last_progress = progress, time.monotonic()
        time.sleep(0.2)
    if arrivals:
        arrivals.stop()
        arrivals.check()
    if not binds.last_cpu:  # not every pod was bound: the window ends now
        binds.last_cpu = procs.cpu_sample(binds.groups)
    ended_wall = time.time()
    scheduler_scrape = schedmetrics.settled_scrape(stack.control_plane.scheduler_urls[name], len(binds.at))
    ours_after = schedmetrics.scrape(ours_url, schedmetrics.OURS, ca) if ours_url else {}
    load_end = load_average()
    times = sorted(binds.at.values())
    window = times[-1] - times[0] if len(times) > 1 else 0.0
    bound = len(times)
    cpu = procs.cpu_window(binds.first_cpu, binds.last_cpu, window)
    for key in ("ours_cpu_s", "emulator_cpu_s"):
        cpu.pop(key, None)
    result: Obj = {
        "scheduler_name": SCHEDULER_NAMES[phase] or _extender_scheduler_name(external),
        "pods": len(manifests),
        "bound": bound,
        "create_s": round(created_s, 2),
        "first_bind_after_start_s": round(times[0] - started, 2) if times else None,
        "window_s": round(window, 3),
        "pods_per_second": round((bound - 1) / window, 2) if window > 0 else 0.0,
        "cpu": cpu,
        "cpu_ms_per_pod": {
            k: round(1000 * v / max(1, bound - 1), 2) for k, v in cpu["cpu_s"].items() if k != "machine"
        },
        "kube_scheduler": schedmetrics.kube_scheduler_view(scheduler_scrape),
        "ours": schedmetrics.ours_view(ours_before, ours_after) if ours_url else {},
        "server": schedmetrics.server_timings(cluster.timing_dir, started_wall, ended_wall + 1.0),
        "load_average": {"start": load_start, "end": load_end},
    }
    if arrivals:
        result["arrivals"] = arrivals.report(binds.at)
    say(
        f"  {phase}: {bound}/{len(manifests)} bound in {window:.1f}s = {result['pods_per_second']} pods/s"
        f" (load {' '.join(str(v) for v in load_end)})"
    )
    stack.stop(name)
    informer.stop()
    # every run waits for its pods to run, so the kubelets' (and device plugin's) writes are in its counts
    selector = f"{PHASE_LABEL}={phase}"
    result["settle_s"] = real_after.settle(stack, kube, NAMESPACE, selector, options.settle)
    result["api_requests"] = apicounts.view(api_before, kube.scrape(), kube.harness_counts(), bound)
    if phase == "extender":
        result["correctness"] = real_after.correctness(kube, NAMESPACE, selector, len(manifests))
    else:
        result["correctness"] = {"bound": bound, "ok": bound == len(manifests)}
        real_after.delete_all(stack, stack.kube, NAMESPACE, selector)
    kube.close()
    return result


def run_size(options: RealOptions, stack: Stack, say: Callable[[str], None]) -> Obj:
    """Start the cluster, the three runs, the report row; `stack` is stopped by the caller."""
    say(
        f"{options.nodes} nodes x {options.gpus_per_node} GPUs, {options.pods} pods per run, real control"
        f" plane, kube-scheduler qps {options.qps}"
        + (f", pods arriving at {options.arrival_rate:g}/s" if options.arrival_rate else ", saturated")
        + f" (load {' '.join(map(str, load_average()))})"
    )
    cluster = start(stack, options, say)
    assert stack.control_plane is not None
    phases = {phase: run_phase(cluster, phase, say) for phase in phases_of(options)}
    size = {
        "nodes": options.nodes,
        "gpus_per_node": options.gpus_per_node,
        "pods": options.pods,
        "workers": options.workers,
        "threads": options.threads or "default",
        "scheduler_qps": options.qps,
        "node_policy": options.node_policy or "binpack (chart default)",
        "arrival_rate": options.arrival_rate or None,
    }
    return real_summary.headline(size, phases) | {
        "control_plane": "real",
        "versions": stack.control_plane.versions(),
        "startup_s": round(cluster.startup_s, 1),
        "cpu_count": os.cpu_count(),
        "phases": phases,
    }
