"""One end-to-end benchmark run at one cluster size, every actor a real process (stopped by PID at the end).

Order: the API emulator (`python -m sim.emulator`) → bulk seeding of the nodes and running pods → the
simulated kubelets + HAMi device plugin (`python -m sim nodes --no-register`, same seed) → the clock
starts → the registration worker (`python -m workers`) and our service (Gunicorn, `HAMI_WORKERS`,
`HAMI_LEADER_ELECT=false`, `HAMI_BENCH_NOOP=1`) → `/readyz` 200 with every node registered = start-up time →
the webhook burst → the measured pods created through the API → the quiet no-op floor → the measured
window (serial /filter with the no-op floor interleaved, concurrent /bind, the device plugin allocating and
releasing locks) → settle (every bound pod Running) → the correctness check from the API alone
(`sim.workload.report.summarize`) → stop.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from bench import procs, summary
from bench.driver import Scheduler, Scraper, connection_pool, filter_body, noop_floor, webhook_burst
from bench.seed import (
    BENCH_LABEL,
    Scenario,
    bulk_seed,
    cluster_of,
    measured_manifests,
    node_order,
    running_pods,
)
from bench.startup import Options, scrape, start_ours
from config.settings import load_settings
from sim.cluster.actors import stats_of
from sim.cluster.spec import ClusterSpec
from sim.cluster.stack import PY, Stack, flags, start_nodes, wait_until
from sim.kit import podutil
from sim.kit.kube import Kube, pod_path
from sim.kit.processes import wait_for_http
from sim.nodes.objects import node_object
from sim.workload.report import summarize

Obj = dict[str, Any]


def _create_all(kube: Kube, pods: list[Obj], threads: int = 4) -> list[Obj]:
    def create(pod: Obj) -> Obj:
        return kube.create(pod_path(pod["metadata"]["namespace"]), pod)

    with ThreadPoolExecutor(threads, thread_name_prefix="bench-create") as executor:
        return list(executor.map(create, pods))


def _settle(kube: Kube, stack: Stack, timeout: float) -> float:
    """Wait until every bound measured pod is Running (its Allocate done, its lock released); what is
    still left at the timeout shows in the correctness check."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        stack.check()
        pods = kube.list("/api/v1/pods", labelSelector=f"{BENCH_LABEL}=true")[1]
        if all(podutil.phase(p) == "Running" for p in pods if podutil.node_name(p)):
            break
        time.sleep(0.5)
    return time.perf_counter() - started


def run_size(scenario: Scenario, options: Options, stack: Stack, say: Callable[[str], None]) -> Obj:
    """The whole run at one size; `stack` is stopped by the caller (also on failure)."""
    settings = load_settings({})
    vendors = settings.vendors
    began = time.perf_counter()
    stack.kubeconfig.unlink(missing_ok=True)
    emulator = stack.start(
        "apiserver", [PY, "-m", "sim.emulator", *flags(port=0, kubeconfig=stack.kubeconfig)]
    )
    wait_until("the API emulator's kubeconfig", stack.kubeconfig.exists, 30, stack, 0.05)
    kube = stack.kube = Kube.from_kubeconfig(stack.kubeconfig, pool_size=16)
    wait_for_http(f"{kube.config.server}/version", timeout=30, process=emulator)

    cluster = cluster_of(scenario)
    nodes = [node_object(spec) for spec in cluster.nodes]
    running = running_pods(cluster, scenario.running, scenario.seed, vendors)
    bulk_seed(stack.http, kube.config.server, nodes)
    bulk_seed(stack.http, kube.config.server, running)
    seeded = time.perf_counter() - began
    say(f"  seeded {len(nodes)} nodes and {len(running)} running pods in {seeded:.1f}s")

    nodes_spec = ClusterSpec.of(vars(scenario), allocate_latency=options.allocate_latency)
    extra = ("--no-register", "--workers", str(options.plugin_workers))
    plugin = start_nodes(stack, nodes_spec, stack.kubeconfig, *extra, timeout=120)

    startup = start_ours(stack, scenario, options)
    gunicorn_workers = procs.children(stack.processes["service"].pid)
    checkpoints: dict[str, list[float]] = {}

    def checkpoint(name: str) -> None:
        checkpoints[name] = [procs.memory_mb(pid).get("VmRSS", 0.0) for pid in gunicorn_workers]

    checkpoint("ready")
    say(f"  service ready after {startup.ready_s:.1f}s, handshakes written after {startup.handshakes_s:.1f}s")

    webhook_pool = connection_pool(stack.service_url, options.webhook_threads)
    try:
        mutated, webhook_ms = webhook_burst(
            webhook_pool, measured_manifests(scenario.pods, scenario.seed), options.webhook_threads
        )
    finally:
        webhook_pool.close()
    checkpoint("after_webhook")
    created = _create_all(kube, mutated)
    names_json = orjson.dumps(node_order(nodes))
    work = [(podutil.key(p), podutil.uid(p), filter_body(p, names_json)) for p in created]

    scheduler = Scheduler(
        stack.service_url,
        names_json,
        lambda key: kube.get(pod_path(*key.split("/", 1))),
        options.bind_workers,
    )
    try:
        noop_ms = noop_floor(scheduler.filter_pool, [body for _, _, body in work])
        checkpoint("after_noop")
        master = stack.processes["service"].pid
        groups = {
            "apiserver": [emulator.pid],
            "service": [master, *gunicorn_workers],
            "worker": [stack.processes["worker"].pid],
            "nodes": [plugin.pid],
        }
        service_metrics = f"{stack.service_url}/metrics"
        scrape_times: list[float] = []
        before_scrape = scrape(stack, service_metrics, scrape_times)
        checkpoint("after_metrics_scrape")
        before_cpu = procs.cpu_sample(groups)
        window_start = time.perf_counter()
        say(f"  scheduling {len(work)} pods over {scenario.nodes} nodes ...")
        scraper = Scraper(stack.service_url, options.scrape_interval)
        if options.scrape_interval > 0:
            scraper.start()
        measured = scheduler.run(work)
        window = time.perf_counter() - window_start
        scrapes_ms = scraper.stop() if options.scrape_interval > 0 else []
        after_cpu = procs.cpu_sample(groups)
        rss = {pid: procs.memory_mb(pid) for pid in gunicorn_workers}  # the end of the window
        others_rss = {
            "registration_worker": procs.memory_mb(stack.processes["worker"].pid),
            "apiserver": procs.memory_mb(emulator.pid),
            "device_plugin": procs.memory_mb(plugin.pid),
        }
        checkpoint("after_window")
        after_scrape = scrape(stack, service_metrics)
        checkpoint("after_second_metrics_scrape")
    finally:
        scheduler.close()
    settle_s = _settle(kube, stack, options.settle)
    passes, total = summary.sweep_stats(scrape(stack, startup.metrics_url))
    stack.check()

    all_pods, all_nodes = kube.list("/api/v1/pods")[1], kube.list("/api/v1/nodes")[1]
    events = Counter(str(e.get("reason")) for e in kube.list("/api/v1/events")[1])
    stack.stop("nodes")  # its final stats file
    verdict = summarize(all_pods, all_nodes)
    mine = [p for p in all_pods if podutil.labels(p).get(BENCH_LABEL) == "true"]
    bound = sum(1 for p in mine if podutil.node_name(p))
    correctness = {
        "oversubscribed_devices": verdict["oversubscribed_devices"],
        "oversubscribed": verdict["oversubscribed"][:10],
        "misplaced_devices": verdict["misplaced_devices"][:10],
        "undecodable_allocations": verdict["undecodable_allocations"][:10],
        "node_locks_held": verdict["node_locks_held"],
        "measured_pods": len(mine),
        "measured_bound": bound,
        "measured_running": sum(1 for p in mine if podutil.phase(p) == "Running"),
        "not_bound": dict(sorted(measured.failed.items())[:20]),
    }
    correctness["ok"] = (
        correctness["oversubscribed_devices"] == 0
        and not verdict["misplaced_devices"]
        and not verdict["undecodable_allocations"]
        and verdict["node_locks_held"] == 0
        and bound == len(mine) == scenario.pods
    )

    filter_stats, bind_stats = summary.latency(measured.filter_ms), summary.latency(measured.bind_ms)
    noop_stats, quiet_stats = summary.latency(measured.noop_ms), summary.latency(noop_ms)
    webhook_stats = summary.latency(webhook_ms)
    later = passes - startup.passes_before
    cpu = procs.cpu_window(before_cpu, after_cpu, window)
    worker_rss = max((m.get("VmRSS", 0.0) for m in rss.values()), default=0.0)
    return {
        "nodes": scenario.nodes,
        "gpus_per_node": scenario.gpus_per_node,
        "running_pods": len(running),
        "pods": scenario.pods,
        "workers": options.workers,
        "filter_p50_ms": filter_stats["p50_ms"],
        "filter_p99_ms": filter_stats["p99_ms"],
        "noop_p50_ms": noop_stats["p50_ms"],
        "noop_quiet_p50_ms": quiet_stats["p50_ms"],
        "filter_noop_ratio": (
            round(filter_stats["p50_ms"] / noop_stats["p50_ms"], 2) if noop_stats["p50_ms"] else None
        ),
        "filter_noop_quiet_ratio": (
            round(filter_stats["p50_ms"] / quiet_stats["p50_ms"], 2) if quiet_stats["p50_ms"] else None
        ),
        "bind_p50_ms": bind_stats["p50_ms"],
        "bind_p99_ms": bind_stats["p99_ms"],
        "webhook_p50_ms": webhook_stats["p50_ms"],
        "webhook_p99_ms": webhook_stats["p99_ms"],
        "pods_per_second": round(len(measured.bound) / measured.seconds, 1) if measured.bound else 0.0,
        "scheduling_seconds": round(measured.seconds, 2),
        "bind_tail_s": round(max(0.0, measured.last_bind - measured.last_filter), 3),
        "nodes_used": len(measured.nodes),
        "max_pods_per_node": max(measured.nodes.values(), default=0),
        "startup_s": round(startup.ready_s, 2),
        "startup": startup.as_json(),
        "registration_sweep_s": round(startup.first_pass_s, 3) if startup.first_pass_s is not None else None,
        "registration_sweep_window_mean_s": (
            round((total - startup.seconds_before) / later, 3) if later > 0 else None
        ),
        "registration_passes": passes,
        "worker_rss_mb": worker_rss,
        "worker_rss_peak_mb": max((m.get("VmHWM", 0.0) for m in rss.values()), default=0.0),
        "worker_rss_checkpoints_mb": checkpoints,
        "metrics_scrape_s": round(scrape_times[0], 3),  # one GET /metrics of the service, HAMi's gauges too
        "window_scrapes": summary.latency(scrapes_ms),
        "rss_mb": {"gunicorn_workers": list(rss.values()), **others_rss},
        "latency": {
            "filter": filter_stats,
            "bind": bind_stats,
            "noop": noop_stats,
            "noop_quiet": quiet_stats,
            "webhook": webhook_stats,
        },
        "cpu": cpu,
        "cpu_ms_per_pod": {
            k: round(1000 * v / max(1, len(measured.bound)), 2) for k, v in cpu["cpu_s"].items()
        },
        "service": summary.service_breakdown(before_scrape, after_scrape),
        "counters": dict(sorted(measured.counters.items())),
        "events_by_reason": dict(sorted(events.items())),  # posted by the service (rate-limited, may drop)
        "correctness": correctness,
        "device_plugin": stats_of(stack.workdir / "nodes-stats.json"),  # counters, Allocate and admit ms
        "seed_s": round(seeded, 2),
        "settle_s": round(settle_s, 2),
        "run_s": round(time.perf_counter() - began, 2),
    }
