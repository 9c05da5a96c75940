"""`python -m bench` end to end at a tiny size on both control planes: the harness runs, the report has every
key, the correctness checks passed and no child process survives. Benchmarks are not tests: nothing here
asserts a timing."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from sim.cluster.stack import free_port, pid_alive
from sim.controlplane import binaries
from sim.emulator.testing import REPO_ROOT
from sim.kit.processes import start_process

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


# A guard against a hung benchmark, not a speed check: generous enough for a loaded 2-core machine.
HANG_GUARD_S = 900.0


def run_bench(tmp_path: Path, extra: list[str]) -> dict[str, Any]:
    """`python -m bench` with `extra` arguments, its report; fails the test when a child process survived."""
    report_path = tmp_path / "bench.json"
    argv = [
        sys.executable,
        "-m",
        "bench",
        *extra,
        "--report",
        str(report_path),
        "--workdir",
        str(tmp_path / "run"),
    ]
    bench = start_process(argv, log_path=tmp_path / "bench.log", cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + HANG_GUARD_S
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
    report: dict[str, Any] = orjson.loads(report_path.read_bytes())
    return report


def test_tiny_benchmark_reports_every_key_and_stays_correct(tmp_path: Path) -> None:
    argv = [
        "--control-plane", "emulator", "--nodes", "12", "--gpus-per-node", "4", "--running-pods", "24",
        "--pods", "12", "--workers", "2", "--no-growth", "--settle", "20",
    ]  # fmt: skip
    report = run_bench(tmp_path, argv)
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


REAL_KEYS = {
    "extender_pods_per_second",
    "baseline_pods_per_second",
    "noop_pods_per_second",
    "extender_throughput_ratio",
    "filter_p50_ms",
    "noop_p50_ms",
    "filter_noop_ratio",
    "ks_algorithm_p50_ms",
    "ks_extender_minus_noop_mean_ms",
    "ks_filter_noop_ratio",
    "cpu_ms_per_pod",
    "api_requests_per_pod",
    "api_requests_per_pod_total",
    "mode",
    "load_average",
    "targets",
    "versions",
    "phases",
}


def assert_api_requests_plausible(report: dict[str, Any], pods: int) -> None:
    """kube-apiserver's counts per scheduled pod (bench/apicounts.py): every run bound each pod once
    through the API, the driver's own creations are counted on its side and left out, our extender
    patches the pod it places."""
    for name, phase in report["phases"].items():
        requests = phase["api_requests"]
        assert requests["pods"] == pods, name
        assert requests["harness"]["POST pods"] == pods, name  # the driver created each pod once
        assert requests["all_clients"]["POST pods"] >= pods, name  # and kube-apiserver saw them
        per_pod = requests["per_pod"]
        assert per_pod == report["api_requests_per_pod"][name]
        assert "POST pods" not in per_pod, name  # nobody but the driver creates pods
        assert per_pod["POST pods/binding"] >= 1.0, name  # the default binder or our /bind
        assert per_pod["PATCH pods/status"] >= 1.0, name  # the simulated kubelets: Running
        assert requests["per_pod_total"] == report["api_requests_per_pod_total"][name]
        assert abs(requests["per_pod_total"] - sum(per_pod.values())) < 0.001 * len(per_pod) + 1e-9, name
        assert requests["by_flow_schema"].get("service-accounts", 0) > 0, name  # kube-scheduler's SA
    assert report["api_requests_per_pod"]["extender"].get("PATCH pods", 0) >= 1.0  # allocation annotations


@pytest.mark.real
def test_tiny_real_benchmark_runs_three_schedulers_and_reports_every_field(tmp_path: Path) -> None:
    try:
        binaries.find()
    except binaries.MissingBinaries as exc:
        pytest.fail(str(exc))
    """In latency mode (`--arrival-rate`: each run's pods created at 20/s while its kube-scheduler runs);
    the saturated mode is the next test's."""
    report = run_bench(
        tmp_path,
        [
            "--control-plane",
            "real",
            "--nodes",
            "3",
            "--gpus-per-node",
            "2",
            "--pods",
            "6",
            "--arrival-rate",
            "20",
        ],
    )
    assert report["exit"] == "completed"
    assert REAL_KEYS - set(report) == set()
    assert report["control_plane"] == "real" and report["correct"] is True
    assert report["mode"] == "latency" and report["arrival_rate"] == 20.0
    assert set(report["phases"]) == {"baseline", "noop", "extender"}
    for name, phase in report["phases"].items():
        assert phase["bound"] == 6, name
        assert phase["kube_scheduler"]["attempts"].get("scheduled") == 6, name  # kube-scheduler's own metrics
        assert phase["cpu_ms_per_pod"]["kube-scheduler"] >= 0, name
        assert phase["arrivals"]["created"] == 6 and phase["arrivals"]["create_to_bind_ms"]["n"] == 6, name
        assert report["ks_algorithm_p50_ms"][name] > 0, name  # the latency the mode is for
    assert set(report["create_to_bind_p50_ms"]) == {"baseline", "noop", "extender"}
    assert_api_requests_plausible(report, 6)
    extender, noop = report["phases"]["extender"], report["phases"]["noop"]
    assert extender["correctness"]["oversubscribed_devices"] == 0
    assert extender["correctness"]["node_locks_held"] == 0
    assert extender["server"]["/filter"]["n"] >= 6 and extender["server"]["/bind"]["n"] >= 6
    assert extender["ours"]["filter"]["n"] >= 6 and "fit" in extender["ours"]["filter_phases"]
    # the chart's extender defers the allocation write (issue 20): no API call inside /filter
    assert not {"patch", "pod_lookup"} & set(extender["ours"]["filter_phases"])
    assert noop["server"]["/bench/noop"]["n"] >= 6 and "/filter" not in noop["server"]
    assert "/filter" not in report["phases"]["baseline"]["server"]
    # pods/s is the arrival rate here: only the floor ratios are judged
    assert set(report["targets"]) == {"filter_noop_ratio", "ks_filter_noop_ratio"}
    scheduler_pids = {k for k in report["child_pids"]["real-n3"] if k.startswith("scheduler-")}
    assert scheduler_pids == {"scheduler-baseline", "scheduler-noop", "scheduler-extender"}
    assert report["children_left"] == []


@pytest.mark.real
def test_real_benchmark_measures_an_extender_it_did_not_start(tmp_path: Path) -> None:
    """`--extender-url` with `--external-start`: our scheduler started as an outside extender
    (bench.outside) against the harness's kubeconfig; the harness starts no service of its own, registers
    the outside webhook with its CA, runs the baseline and the extender runs, and stops the outside
    extender's whole process group at the end."""
    try:
        binaries.find()
    except binaries.MissingBinaries as exc:
        pytest.fail(str(exc))
    port, outside = free_port(), tmp_path / "outside"
    url, ca = f"https://127.0.0.1:{port}", str(outside / "tls" / "ca.crt")
    start = f"{sys.executable} -m bench.outside --port {port} --workdir {outside}"
    report = run_bench(
        tmp_path,
        [
            "--control-plane", "real", "--nodes", "3", "--gpus-per-node", "2", "--pods", "6",
            "--extender-url", url, "--extender-ca", ca, "--webhook-url", f"{url}/webhook", "--webhook-ca", ca,
            "--scheduler-name", "hami-scheduler", "--external-start", start, "--external-wait", "300",
        ],
    )  # fmt: skip
    assert report["exit"] == "completed" and report["correct"] is True
    assert report["mode"] == "saturated" and report["arrival_rate"] is None
    assert set(report["phases"]) == {"baseline", "extender"}
    assert set(report["targets"]) == {"extender_throughput_ratio"}
    assert report["extender_throughput_ratio"] > 0
    extender = report["phases"]["extender"]
    assert extender["bound"] == 6 and extender["correctness"]["oversubscribed_devices"] == 0
    # started by the simulated HAMi device plugin, which reads the allocation the outside extender wrote
    assert extender["correctness"]["running"] == 6 and extender["correctness"]["node_locks_held"] == 0
    assert extender["scheduler_name"] == "hami-scheduler (set by its webhook)"
    assert extender["cpu_ms_per_pod"]["external"] > 0  # the outside extender did the filter and bind work
    assert_api_requests_plausible(report, 6)
    pids = report["child_pids"]["real-n3"]
    assert "service" not in pids and "worker" not in pids and "external" in pids
    assert report["children_left"] == []
    log = (tmp_path / "bench.log").read_text()
    assert f"admin kubeconfig: {tmp_path / 'run' / 'real-n3' / 'kubeconfig'}" in log
