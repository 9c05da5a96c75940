"""What HAMi's gauges cost at scale: the registration worker's render and one extender /metrics scrape.

    python -m bench.metrics_scale [--nodes 5000] [--gpus-per-node 8] [--running-pods 20000] [--repeat 3]
                                  [--json FILE]

The state (inventory snapshot and ledger) is built with `bench/cluster.py`, as the registration worker
would have left it. Each side then runs in a fresh child process, so that neither's memory shows in the
other's figures:

- `render`: `workers.statemetrics.StateMetrics.step()` — the worker's first render (it also loads the
  ledger into its view), then `--repeat` renders each after one reservation changed;
- `scrape`: the extender's Flask app (`app.factory.create_app`, multiprocess mode as under Gunicorn, its
  context warmed like a worker's after fork), then `--repeat` `GET /metrics` through the WSGI test client,
  the body read in the server's chunks and closed, as Gunicorn does (without the socket and TLS).

Per step: CPU seconds (`time.process_time`), wall seconds, the RSS after minus before, the peak RSS during
the step minus the RSS before (`VmHWM` reset through `/proc/self/clear_refs`), and bytes produced.
docs/benchmarks.md, "Metrics at scale", has the figures and the before/after comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench import cluster
from bench.procs import memory_mb

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: unused}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def _measure(step: Callable[[], int]) -> dict[str, float]:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = memory_mb(os.getpid())["VmRSS"]
    cpu, wall = time.process_time(), time.perf_counter()
    size = step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = memory_mb(os.getpid())
    return {
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "rss_mb": after["VmRSS"],
        "rss_delta_mb": round(after["VmRSS"] - before, 1),
        "peak_delta_mb": round(after["VmHWM"] - before, 1),
        "bytes": size,
    }


def _render(state_dir: Path, repeat: int) -> list[dict[str, float]]:
    from app.state import gauges, snapshot
    from app.state.ledger import Ledger
    from workers.metrics import WorkerMetrics
    from workers.statemetrics import StateMetrics

    current = snapshot.read(state_dir)
    renderer = StateMetrics(state_dir, 10.0, lambda: current, WorkerMetrics().state_metrics_seconds)
    ledger = Ledger(state_dir)
    entry = ledger.all_entries()[0]
    path = state_dir / gauges.GAUGES_FILE

    def step() -> int:
        assert renderer.step()
        return path.stat().st_size

    results = [_measure(step)]
    for n in range(repeat):
        ledger.upsert([dataclasses.replace(entry, updated_at=float(n))])  # one row changed: a render
        results.append(_measure(step))
    renderer.stop()
    ledger.close()
    return results


def _scrape(state_dir: Path, repeat: int) -> list[dict[str, float]]:
    from app.factory import build_context, create_app
    from config.settings import Settings

    kubeconfig = state_dir.parent / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    settings = Settings(state_dir=state_dir, kubeconfig=str(kubeconfig), events_enabled=False)
    context = build_context(settings)  # warmed: snapshot, usage view, fast path, as after fork
    client = create_app(settings, context).test_client()

    def step() -> int:
        size = 0
        with client.get("/metrics", buffered=False) as reply:
            for chunk in reply.response:
                size += len(chunk)
        return size

    results = [_measure(step) for _ in range(repeat)]
    context.close()
    return results


def _child(role: str, state_dir: Path, repeat: int) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "bench.metrics_scale", f"--role={role}", f"--state={state_dir}"]
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(state_dir.parent / f"multiproc-{role}")}
    Path(env["PROMETHEUS_MULTIPROC_DIR"]).mkdir(exist_ok=True)
    output = subprocess.run(
        [*command, f"--repeat={repeat}"], env=env, check=True, capture_output=True, timeout=900
    ).stdout
    result: list[dict[str, Any]] = orjson.loads(output.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--running-pods", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--role", choices=("render", "scrape"), help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        run = _render if args.role == "render" else _scrape
        print(orjson.dumps(run(args.state, args.repeat)).decode())
        return 0
    from app.devices import build_vendors

    with tempfile.TemporaryDirectory(prefix="metrics-scale-") as work:
        state_dir = Path(work) / "state"
        state_dir.mkdir()
        built = cluster.build(
            args.nodes, args.gpus_per_node, args.running_pods, build_vendors(None), args.seed
        )
        cluster.write_state(state_dir, built)
        del built
        report = {
            "nodes": args.nodes,
            "gpus_per_node": args.gpus_per_node,
            "running_pods": args.running_pods,
            "render": _child("render", state_dir, args.repeat),  # also leaves the file the scrape streams
            "scrape": _child("scrape", state_dir, args.repeat),
        }
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
