"""In-process micro-benchmark of /filter's own work at scale (issue 7): `python -m bench.filter_micro`.

Builds 5,000 nodes x 8 GPUs (HAMi register data, 3 zones) and 20,000 running reservations in a ledger in a
temporary state directory, then measures, without HTTP:

- the filter decision per pod (parse the pod, refresh usage, decide, assume in the ledger) for 2,000 pods of
  the demo's mix, including its unschedulable share; the NodeNames list is re-decoded for every pod, as
  kube-scheduler sends a fresh one each cycle;
- the annotation PATCH of one pod against the API emulator (started in this process), through the
  kubernetes client's generated method and through `app.k8s.objects` (what the service uses);
- the snapshot: publish, first load and an incremental reload after one node changed;
- the resident memory of the measuring process, which is a fresh child process that imports and builds
  exactly what a Gunicorn worker does (`app.factory.build_context`).

Numbers are wall-clock on whatever machine runs it; compare runs on the same machine only.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from app.core.decision import allocation_annotations, pod_context
from app.core.model import ContainerDevice
from app.devices import build_vendors
from app.filter.outcome import FilterOutcome
from app.state import snapshot
from app.state.inventory import InventoryCache
from bench import cluster

PATCH_CALLS = 300


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max in milliseconds."""
    if not samples:
        return {}
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"n": len(ordered), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1] * 1000}


def _rss_mb() -> dict[str, float]:
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def _measure(state_dir: str, kubeconfig: str, pods: int, seed: int, profile: int) -> dict[str, Any]:
    """Runs in a fresh process: build a worker's context and time the filter decision for `pods` pods."""
    from app.factory import build_context
    from app.filter import usecase as filtering
    from app.state.ledger import ASSUMED, CONFIRMED
    from config.settings import Settings

    settings = Settings(state_dir=Path(state_dir), kubeconfig=kubeconfig, events_enabled=False)
    started = time.perf_counter()
    context = build_context(settings)  # loads the snapshot, the usage view and the fast path's table
    warm_up = time.perf_counter() - started
    rss_after_warm_up = _rss_mb()
    vendors = settings.vendors
    current = context.inventory.current()
    assert current is not None
    blob = orjson.dumps(list(current.nodes))
    workload = cluster.pods_to_schedule(pods, vendors, seed)
    samples: dict[str, list[float]] = {"placed": [], "unplaced": [], "confirm": [], "cpu": []}

    def filter_once(pod: dict[str, Any]) -> tuple[bool, float, float]:
        names = orjson.loads(blob)
        begin, cpu = time.perf_counter(), time.thread_time()
        probe = pod_context(pod, vendors, settings.policies, {})
        current = context.refresh()
        assert current is not None
        reserved = filtering.reserve(context, pod, probe, names, current, FilterOutcome())
        return reserved is not None, time.perf_counter() - begin, time.thread_time() - cpu

    _, first, _ = filter_once(workload[0])
    for pod in workload[1:]:
        placed, elapsed, cpu = filter_once(pod)
        samples["placed" if placed else "unplaced"].append(elapsed)
        samples["cpu"].append(cpu)
        if placed:
            begin = time.perf_counter()
            context.ledger.set_state(pod["metadata"]["uid"], CONFIRMED, only_from=(ASSUMED,))
            samples["confirm"].append(time.perf_counter() - begin)
    result: dict[str, Any] = {
        "warm_up_ms": warm_up * 1000,
        "first_filter_ms": first * 1000,
        "filter": percentiles(samples["placed"] + samples["unplaced"]),
        "filter_placed": percentiles(samples["placed"]),
        "filter_unplaced": percentiles(samples["unplaced"]),
        "filter_cpu": percentiles(samples["cpu"]),
        "confirm": percentiles(samples["confirm"]),
        "rss_mb": {"after_warm_up": rss_after_warm_up.get("VmRSS", 0.0), **_rss_mb()},
    }
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0002)
        with profiler:
            for pod in cluster.pods_to_schedule(profile, vendors, seed + 1):
                filter_once(pod)
        result["profile"] = profiler.output_text(unicode=False, color=False, short_mode=True)
    context.close()
    return result


def _child(queue: Any, *args: Any) -> None:
    queue.put(_measure(*args))


def _timed(calls: int, action: Callable[[int], object]) -> dict[str, dict[str, float]]:
    """Wall time, and CPU time of the calling thread (the in-process emulator's threads excluded)."""
    wall, cpu = [], []
    for i in range(calls):
        begin, cpu_begin = time.perf_counter(), time.thread_time()
        action(i)
        wall.append(time.perf_counter() - begin)
        cpu.append(time.thread_time() - cpu_begin)
    return {"wall": percentiles(wall), "cpu": percentiles(cpu)}


def _patch_costs(emulator_kubeconfig: Path, emulator: Any, node: str) -> dict[str, dict[str, Any]]:
    """One filter's annotation PATCH, through the generated client method and through app.k8s.objects."""
    from app.k8s import objects
    from app.k8s.client import DEFAULT_TIMEOUT, connect

    kube = connect(str(emulator_kubeconfig))
    names = {v: [f"patch-{v}-{i:04d}" for i in range(PATCH_CALLS + 1)] for v in ("generated", "ours")}
    emulator.seed(
        [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": "default", "uid": n}}
            for variant in names.values()
            for n in variant
        ]
    )
    devices = {"NVIDIA": ((ContainerDevice("GPU-x", "NVIDIA", 4096, 10),),)}
    annotations = allocation_annotations(node, devices, build_vendors(None), int(time.time()))
    labels = {"hami.io/vgpu-node": node}

    def generated(i: int) -> None:
        name = names["generated"][i]
        body = {"metadata": {"annotations": annotations, "labels": labels, "uid": name}}
        core: Any = kube.core  # with _preload_content=False it returns the urllib3 response
        response = core.patch_namespaced_pod(
            name,
            "default",
            body,
            _content_type=objects.MERGE_PATCH,
            _preload_content=False,
            _request_timeout=DEFAULT_TIMEOUT,
        )
        orjson.loads(response.data)
        response.release_conn()

    def ours(i: int) -> None:
        name = names["ours"][i]
        objects.patch_pod_metadata(kube, "default", name, annotations, labels, uid=name)

    generated(PATCH_CALLS)  # warm the connection pool
    ours(PATCH_CALLS)
    try:
        return {
            "generated client method": _timed(PATCH_CALLS, generated),
            "app.k8s.objects": _timed(PATCH_CALLS, ours),
        }
    finally:
        kube.close()


def _snapshot_costs(state_dir: Path, built: cluster.Cluster) -> dict[str, float]:
    cache = InventoryCache(state_dir)
    begin = time.perf_counter()
    loaded = cache.current()
    first = time.perf_counter() - begin
    assert loaded is not None
    name = next(iter(loaded.nodes))
    record = loaded.nodes[name]
    devices = dataclasses.replace(record.devices, cordoned=frozenset({record.devices.devices[0].id}))
    changed = {**loaded.nodes, name: dataclasses.replace(record, devices=devices, rev=2)}
    begin = time.perf_counter()
    snapshot.write(state_dir, dataclasses.replace(loaded, generation=2, nodes=changed))
    publish = time.perf_counter() - begin
    time.sleep(0.01)  # a distinct mtime for the stamp
    begin = time.perf_counter()
    reloaded = cache.current()
    incremental = time.perf_counter() - begin
    assert reloaded is not None and reloaded.generation == 2
    return {
        "publish_ms": publish * 1000,
        "first_load_ms": first * 1000,
        "incremental_reload_ms": incremental * 1000,
        "size_mb": (state_dir / snapshot.SNAPSHOT_FILE).stat().st_size / 1e6,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from sim.emulator import Emulator

    vendors = build_vendors(None)
    begin = time.perf_counter()
    built = cluster.build(args.nodes, args.gpus, args.running, vendors, args.seed)
    with tempfile.TemporaryDirectory(prefix="filter-micro-") as tmp, Emulator() as emulator:
        state_dir = Path(tmp) / "state"
        cluster.write_state(state_dir, built)
        kubeconfig = emulator.write_kubeconfig(Path(tmp) / "kubeconfig")
        setup = time.perf_counter() - begin
        spawn = multiprocessing.get_context("spawn")
        queue = spawn.Queue()
        child = spawn.Process(
            target=_child, args=(queue, str(state_dir), str(kubeconfig), args.pods, args.seed, args.profile)
        )
        child.start()
        measured = queue.get()
        child.join()
        result = {
            "scenario": {
                "nodes": args.nodes,
                "gpus_per_node": args.gpus,
                "running": len(built.entries),
                "pods": args.pods,
                "seed": args.seed,
                "setup_s": setup,
            },
            **measured,
            "patch": _patch_costs(kubeconfig, emulator, built.node_names[0]),
            "snapshot": _snapshot_costs(state_dir, built),
        }
    return result


def _row(label: str, stats: dict[str, float]) -> list[str]:
    return [label, str(stats["n"]), *(f"{stats[q]:.2f}" for q in ("p50", "p90", "p99", "max"))]


def table(result: dict[str, Any]) -> str:
    rows = [["what", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"]]
    for label, key in (
        ("filter decision, all pods", "filter"),
        ("  placed", "filter_placed"),
        ("  unschedulable", "filter_unplaced"),
        ("  CPU time, all pods", "filter_cpu"),
        ("confirm (ledger state)", "confirm"),
    ):
        if result.get(key):
            rows.append(_row(label, result[key]))
    for label, stats in result["patch"].items():
        rows += [_row(f"PATCH via {label}", stats["wall"]), _row("  CPU time", stats["cpu"])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)) for r in rows
    ]
    snap, rss = result["snapshot"], result["rss_mb"]
    lines += [
        "",
        f"worker start-up (build_context: snapshot, usage view, fast-path table):"
        f" {result['warm_up_ms']:.0f} ms; first filter after it: {result['first_filter_ms']:.1f} ms",
        f"snapshot {snap['size_mb']:.1f} MB: publish {snap['publish_ms']:.0f} ms, first load"
        f" {snap['first_load_ms']:.0f} ms, incremental reload (one node changed)"
        f" {snap['incremental_reload_ms']:.0f} ms",
        f"measuring process RSS: {rss['after_warm_up']:.0f} MB after start-up, {rss['VmRSS']:.0f} MB after"
        f" the pods (peak {rss['VmHWM']:.0f} MB)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.filter_micro", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--running", type=int, default=20000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="profile N more filter calls")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    result = run(args)
    print(table(result))
    if "profile" in result:
        print()
        print(result["profile"])
    if args.json:
        args.json.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
