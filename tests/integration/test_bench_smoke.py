"""`python -m bench` end to end at a tiny size: the harness runs, the report has every key, the correctness
checks passed and no child process survives. Benchmarks are not tests: nothing here asserts a timing."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest

from sim.processes import start_process
from sim.stack import pid_alive
from sim.testing import REPO_ROOT

pytestmark = pytest.mark.integration

REPORT_KEYS = {
    "filter_p50_ms",
    "filter_p99_ms",
    "noop_p50_ms",
    "filter_noop_ratio",
    "bind_p50_ms",
    "bind_p99_ms",
    "webhook_p99_ms",
    "pods_per_second",
    "registration_sweep_s",
    "worker_rss_mb",
    "startup_s",
    "cpu",
    "growth",
    "targets",
    "correctness",
    "machine",
    "child_pids",
    "children_left",
}


def survivors(report_path: Path) -> list[int]:
    if not report_path.exists():
        return []
    groups = orjson.loads(report_path.read_bytes()).get("child_pids") or {}
    return [pid for size in groups.values() for pids in size.values() for pid in pids if pid_alive(pid)]


def test_tiny_benchmark_reports_every_key_and_stays_correct(tmp_path: Path) -> None:
    report_path = tmp_path / "bench.json"
    argv = [
        sys.executable, "-m", "bench", "--nodes", "12", "--gpus-per-node", "4", "--running-pods", "24",
        "--pods", "12", "--workers", "2", "--no-growth", "--settle", "20", "--report", str(report_path),
        "--workdir", str(tmp_path / "run"),
    ]  # fmt: skip
    bench = start_process(argv, log_path=tmp_path / "bench.log", cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 55
        while bench.alive():
            if time.monotonic() > deadline:
                pytest.fail(f"the benchmark did not finish:\n{bench.log_tail()}")
            time.sleep(0.2)
        assert bench.returncode == 0, bench.log_tail()
    finally:
        bench.stop(timeout=30)  # SIGTERM: the harness stops its children first
        leftovers = survivors(report_path)
        for pid in leftovers:  # only if the harness failed to: never leave them behind
            os.kill(pid, signal.SIGKILL)
    assert leftovers == []
    report = orjson.loads(report_path.read_bytes())
    assert report["exit"] == "completed"
    assert REPORT_KEYS - set(report) == set()
    assert report["correctness"]["ok"] is True
    assert report["correctness"]["oversubscribed_devices"] == 0
    assert report["correctness"]["measured_bound"] == 12
    assert report["children_left"] == []
    assert [row["nodes"] for row in report["growth"]] == [12]
    assert set(report["targets"]["checks"]) == {
        "filter_p99_ms",
        "filter_noop_ratio",
        "pods_per_second",
        "registration_sweep_s",
        "worker_rss_mb",
    }
    pids = report["child_pids"]["n12"]
    assert set(pids) == {"apiserver", "nodes", "worker", "service"}
    assert len(pids["service"]) >= 3  # the Gunicorn master and its two workers
