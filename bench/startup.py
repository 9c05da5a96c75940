"""Starting our two processes for a benchmark run and timing their start-up.

The registration worker (`python -m workers`, INFO logs for its own timestamps) and Gunicorn
(`config/gunicorn.conf.py`, or `bench/gunicorn_profile.py` with `--profile`) start together with the
production settings except: `HAMI_LEADER_ELECT=false` (one replica), `HAMI_BENCH_NOOP=1` (the floor route),
local ports, a work-dir state directory. Start-up is measured from the moment both are launched:

- `informers_synced_s`, `synced_s`: the worker's own log lines (lists done; ledger rebuilt + first pass);
- `readyz_s`: the first `/readyz` 200; `ready_s`: also `/debug/state` counts every node (a Gunicorn worker
  loaded the snapshot) — the start-up figure of the report;
- `first_pass_s`: the worker's first registration pass (cold: decodes every node), read from its
  histogram once, right when the service is ready (exact while the count is 1, else the mean so far);
- `handshakes_s`: the leader's first-start handshake stamps (one PATCH per node) are all written. The
  measured window starts after them, so they do not run inside it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

from bench import summary
from bench.seed import Scenario
from sim.cluster.stack import PY, DemoFailure, Stack, free_port, wait_until
from sim.kit.processes import wait_for_http


@dataclass(frozen=True)
class Options:
    workers: int = 2
    threads: int = 0  # HAMI_THREADS; 0 = the service's default
    bind_workers: int = 16
    webhook_threads: int = 8
    registration_interval: str = "15s"
    allocate_latency: float = 0.002
    plugin_workers: int = 8
    settle: float = 120.0
    profile: bool = False  # pyinstrument around every request (bench/gunicorn_profile.py): not a result
    scrape_interval: float = 0.0  # GET /metrics every N s during the window (0: no Prometheus)


@dataclass
class Startup:
    metrics_url: str  # the registration worker's /metrics
    began: float = 0.0  # wall clock when both processes were launched
    informers_synced_s: float | None = None
    synced_s: float | None = None
    readyz_s: float | None = None
    ready_s: float = 0.0
    first_pass_s: float | None = None
    first_pass_count: int = 0
    handshakes_s: float | None = None
    passes_before: int = 0  # worker passes before the measured window, and their total seconds
    seconds_before: float = 0.0

    def as_json(self) -> dict[str, float | int | None]:
        def r(value: float | None) -> float | None:
            return round(value, 2) if value is not None else None

        return {
            "informers_synced_s": r(self.informers_synced_s),
            "synced_s": r(self.synced_s),
            "readyz_s": r(self.readyz_s),
            "ready_s": r(self.ready_s),
            "first_pass_s": round(self.first_pass_s, 3) if self.first_pass_s is not None else None,
            "first_pass_count": self.first_pass_count,
            "handshakes_s": r(self.handshakes_s),
        }


def scrape(stack: Stack, url: str, timing: list[float] | None = None) -> summary.Scrape:
    """The families the benchmark reads (`summary.WANTED`) of one `GET url`; the GET's own duration in
    seconds is appended to `timing` (parsing HAMi's per-device gauges here would cost more than serving)."""
    started = time.perf_counter()
    response = stack.http.request("GET", url)
    if timing is not None:
        timing.append(time.perf_counter() - started)
    if response.status != 200:
        raise DemoFailure(f"GET {url}: HTTP {response.status}")
    return summary.parse_metrics(response.data.decode())


def _log_times(log: Path, began: float) -> dict[str, float]:
    """Seconds from `began` to the worker's `informers synced` and `synced` log lines."""
    found: dict[str, float] = {}
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return found
    for line in lines:
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("msg") in ("informers synced", "synced"):
            stamp = datetime.fromisoformat(str(entry["ts"])).timestamp()
            found.setdefault(str(entry["msg"]), stamp - began)
    return found


def start_ours(stack: Stack, scenario: Scenario, options: Options) -> Startup:
    """Worker + Gunicorn; wait until Ready with every node, then until the first handshakes are written."""
    port, metrics_port = free_port(), free_port()
    stack.service_url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HAMI_")},
        "KUBECONFIG": str(stack.kubeconfig),
        "HAMI_STATE_DIR": str(stack.workdir / "state"),
        "HAMI_REGISTRATION_INTERVAL": options.registration_interval,
        "HAMI_WORKER_METRICS_BIND": f"127.0.0.1:{metrics_port}",
        "HAMI_LOG_LEVEL": "WARNING",
        "HAMI_LEADER_ELECT": "false",
        "HAMI_BIND": f"127.0.0.1:{port}",
        "HAMI_WORKERS": str(options.workers),
        "HAMI_BENCH_NOOP": "1",
        "PROMETHEUS_MULTIPROC_DIR": str(stack.workdir / "prometheus"),
    }
    if options.threads:
        env["HAMI_THREADS"] = str(options.threads)
    config = "config/gunicorn.conf.py"
    if options.profile:
        config, env["HAMI_BENCH_PROFILE_DIR"] = "bench/gunicorn_profile.py", str(stack.workdir / "profile")
    startup = Startup(f"http://127.0.0.1:{metrics_port}/metrics", began=time.time())
    started = time.perf_counter()
    worker = [PY, "-m", "workers"]
    if options.profile:  # the work loop (main thread): start-up sync, passes, sweeps
        out = stack.workdir / "profile" / "worker-main-thread.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        worker = [PY, "-m", "pyinstrument", "-r", "text", "--no-color", "-o", str(out), "-m", "workers"]
    stack.start("worker", worker, {**env, "HAMI_LOG_LEVEL": "INFO"})
    service = stack.start("service", [PY, "-m", "gunicorn", "-c", config, "wsgi:app"], env)
    wait_for_http(f"{stack.service_url}/healthz", timeout=120, process=service)

    def ready() -> bool:
        if stack.http.request("GET", f"{stack.service_url}/readyz").status != 200:
            return False
        if startup.readyz_s is None:
            startup.readyz_s = time.perf_counter() - started
        state = orjson.loads(stack.http.request("GET", f"{stack.service_url}/debug/state").data)
        return bool(state.get("nodes", 0) >= scenario.nodes)

    wait_until("the service to be ready with every node registered", ready, 300, stack, 0.1)
    startup.ready_s = time.perf_counter() - started
    passes, seconds = summary.sweep_stats(scrape(stack, startup.metrics_url))
    if passes:
        startup.first_pass_s, startup.first_pass_count = seconds / passes, passes

    def stamped() -> bool:
        values = scrape(stack, startup.metrics_url)
        done = sum(v for (name, _), v in values.items() if name == "hami_worker_handshake_patches_total")
        return done >= scenario.nodes

    wait_until("the first handshake stamps", stamped, 300, stack, 0.5)
    startup.handshakes_s = time.perf_counter() - started
    time.sleep(1.0)  # the pass those node changes trigger (debounced)
    startup.passes_before, startup.seconds_before = summary.sweep_stats(scrape(stack, startup.metrics_url))
    times = _log_times(stack.workdir / "worker.log", startup.began)
    startup.informers_synced_s, startup.synced_s = times.get("informers synced"), times.get("synced")
    return startup
