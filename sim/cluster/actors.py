"""`python -m sim nodes` and `python -m sim scheduler`: the two cluster actors around our service, each as
its own process (so the demo, the benchmark and chaos runs can start, kill and restart them independently).

    python -m sim nodes --kubeconfig F [--nodes 20] [--seed 0] [--gpus-per-node 8] [--models a100-80,h100]
                        [--vendors nvidia,ascend910b3,hygon+cambricon] [--zones 3]
                        [--allocate-latency 0.002] [--workers 8] [--stats FILE]
    python -m sim scheduler --kubeconfig F --extender URL[,URL...] [--ca-file F | --insecure]
                        [--http-timeout 30] [--max-unschedulable 5] [--max-errors 10]
                        [--unschedulable-timeout 5] [--default-profile] [--stats FILE]

Both run until SIGTERM/SIGINT and rewrite their stats file (JSON) every second and once more on exit, and
retry an API call that got no answer, 429 or 5xx (`--api-retries`, 5), as the kubelet's and
kube-scheduler's own callers do.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from sim.kit.command import Command, serve_stats, stop_on_signals
from sim.kit.kube import RESTARTING, TRANSIENT, Kube, KubeError
from sim.kubescheduler.extender import Extender, ExtenderConfig
from sim.kubescheduler.scheduler import SimScheduler
from sim.kubescheduler.state import SchedulerConfig
from sim.nodes.kubelet import Kubelets, PluginConfig
from sim.nodes.objects import DEFAULT_MODELS, build_cluster, parse_models, register_nodes
from sim.nodes.vendors import parse_vendors


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--stats", type=Path, default=None, help="JSON stats file, rewritten every second")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument(
        "--api-retries", type=int, default=5, help="retries of an API call after no answer, 429 or 5xx"
    )
    parser.add_argument(
        "--retry-forbidden",
        action="store_true",
        help="retry a 403 too (a restarted kube-apiserver denies until its authorizers have synced)",
    )


def grace_arguments(parser: argparse.ArgumentParser) -> None:
    """--grace-scale/--grace-cap: how long the simulated kubelets keep a deleted pod running (`sim nodes`,
    and `sim up`, which hands them to its nodes through ClusterSpec)."""
    parser.add_argument(
        "--grace-scale",
        type=float,
        default=1.0,
        help="a deleted pod keeps running for its grace period times this (default: %(default)s)",
    )
    parser.add_argument(
        "--grace-cap",
        type=float,
        default=10.0,
        help="... but at most this many seconds (default: %(default)s)",
    )


def nodes_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument(
        "--models", default=",".join(DEFAULT_MODELS), help="GPU models cycled over the nodes: a100-80,t4:4"
    )
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--split-count", type=int, default=10, help="deviceSplitCount (register count)")
    parser.add_argument("--mig-nodes", type=int, default=0, help="nodes of MIG-capable models in MIG mode")
    parser.add_argument(
        "--vendors",
        default="nvidia",
        help="node kinds cycled over the nodes (sim.nodes.vendors): "
        "nvidia,ascend910b3,hygon+cambricon,mthreads",
    )
    parser.add_argument("--allocate-latency", type=float, default=0.002, help="seconds per Allocate call")
    parser.add_argument("--workers", type=int, default=8, help="allocation threads for all nodes")
    parser.add_argument("--run-seconds", type=float, default=None, help="default pod run time (forever)")
    parser.add_argument("--no-register", action="store_true", help="nodes exist already: only run kubelets")
    parser.add_argument(
        "--finish-deletions",
        action="store_true",
        help="finish graceful deletions: delete with grace 0 once the pod's grace period (scaled, capped) "
        "has passed, as a kubelet does once its containers stopped "
        "(kube-apiserver, the emulator with --kubelet-deletions)",
    )
    grace_arguments(parser)
    parser.add_argument(
        "--stock-gpus",
        action="store_true",
        help="pods without HAMi's annotations get whole GPUs, as from NVIDIA's device plugin (no extender)",
    )


def nodes_main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    done = stop_on_signals()
    try:
        cluster = build_cluster(
            args.nodes,
            seed=args.seed,
            models=parse_models(args.models),
            gpus_per_node=args.gpus_per_node,
            zones=args.zones,
            split_count=args.split_count,
            mig_nodes=args.mig_nodes,
            vendors=parse_vendors(args.vendors),
        )
    except ValueError as exc:
        print(f"sim nodes: {exc}", file=sys.stderr)
        return 2
    if args.grace_scale < 0 or args.grace_cap < 0:
        print("sim nodes: --grace-scale and --grace-cap must not be negative", file=sys.stderr)
        return 2
    retried = RESTARTING if args.retry_forbidden else TRANSIENT
    kube = Kube.from_kubeconfig(args.kubeconfig, max(8, args.workers * 2), args.api_retries, retried)
    kubelets = Kubelets(
        kube,
        cluster,
        PluginConfig(
            allocate_latency=args.allocate_latency,
            workers=args.workers,
            default_run_seconds=args.run_seconds,
            finish_deletions=args.finish_deletions,
            stock_gpus=args.stock_gpus,
            grace_scale=args.grace_scale,
            grace_cap=args.grace_cap,
        ),
    )
    try:
        if not args.no_register:
            register_nodes(kube, cluster)
        kubelets.start()
        kubelets.informer.synced.wait(30)
        print(f"sim nodes: {len(cluster.nodes)} nodes ready", flush=True)
        serve_stats(done, args.stats, kubelets.stats.as_json)
    except KubeError as exc:
        print(f"sim nodes: {exc}", file=sys.stderr)
        return 1
    finally:
        kubelets.stop()
        kube.close()
    return 0


def scheduler_arguments(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument(
        "--extender",
        required=True,
        help="urlPrefix, e.g. https://127.0.0.1:8443; several, comma-separated: the Ready one (a Service)",
    )
    parser.add_argument("--scheduler-name", default="hami-scheduler")
    parser.add_argument("--ca-file", default="", help="tlsConfig.caFile for an HTTPS extender")
    parser.add_argument("--insecure", action="store_true", help="tlsConfig.insecure: true")
    parser.add_argument("--cert-file", default="", help="tlsConfig.certFile: the client certificate")
    parser.add_argument("--key-file", default="", help="tlsConfig.keyFile: the client certificate's key")
    parser.add_argument("--http-timeout", type=float, default=30.0, help="httpTimeout in seconds")
    parser.add_argument("--no-node-cache", action="store_true", help="nodeCacheCapable: false (send Nodes)")
    parser.add_argument("--max-unschedulable", type=int, default=5)
    parser.add_argument("--max-errors", type=int, default=10)
    parser.add_argument("--unschedulable-timeout", type=float, default=5.0)
    parser.add_argument("--initial-backoff", type=float, default=1.0)
    parser.add_argument("--max-backoff", type=float, default=10.0)
    parser.add_argument("--bind-workers", type=int, default=16)
    parser.add_argument("--percentage-of-nodes-to-score", type=int, default=0)
    parser.add_argument(
        "--default-profile",
        action="store_true",
        help="also place default-scheduler pods that ask for no managed resource (the cluster's default)",
    )


def scheduler_main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    done = stop_on_signals()
    extender = Extender(
        ExtenderConfig(
            url_prefix=args.extender,
            node_cache_capable=not args.no_node_cache,
            http_timeout=args.http_timeout,
            ca_file=args.ca_file,
            insecure=args.insecure,
            cert_file=args.cert_file,
            key_file=args.key_file,
        ),
        pool_size=args.bind_workers + 4,
    )
    config = SchedulerConfig(
        scheduler_name=args.scheduler_name,
        max_unschedulable=args.max_unschedulable,
        max_errors=args.max_errors,
        unschedulable_timeout=args.unschedulable_timeout,
        initial_backoff=args.initial_backoff,
        max_backoff=args.max_backoff,
        bind_workers=args.bind_workers,
        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
        default_profile=args.default_profile,
    )
    kube = Kube.from_kubeconfig(args.kubeconfig, args.bind_workers + 8, args.api_retries)
    scheduler = SimScheduler(kube, extender, config)
    try:
        scheduler.start()
        print("sim scheduler: running", flush=True)
        serve_stats(done, args.stats, scheduler.stats_json)
    finally:
        scheduler.stop()
        extender.close()
        kube.close()
    return 0


NODES = Command(nodes_arguments, nodes_main)
SCHEDULER = Command(scheduler_arguments, scheduler_main)


def stats_of(path: Path) -> dict[str, Any]:
    """Read a stats file written by either actor ({} when missing or unreadable)."""
    import orjson

    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
