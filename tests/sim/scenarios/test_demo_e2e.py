"""`python -m sim demo` end to end at a small size (our service over HTTPS, as the chart runs it): every actor
a real process, the report's invariants hold and no child process survives the run."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest

from app.core import reasons
from sim.cluster.stack import pid_alive
from sim.emulator.testing import REPO_ROOT
from sim.kit.processes import start_process

pytestmark = pytest.mark.integration


def surviving_children(report_path: Path) -> list[int]:
    if not report_path.exists():
        return []
    pids = orjson.loads(report_path.read_bytes()).get("child_pids") or {}
    return [pid for group in pids.values() for pid in group if pid_alive(pid)]


HAMI_REASONS = (
    reasons.NODE_INSUFFICIENT_DEVICE,
    reasons.CARD_INSUFFICIENT_MEMORY,
    reasons.CARD_TYPE_MISMATCH,
)
CHILDREN = {
    "emulator": {"apiserver", "nodes", "worker", "service", "scheduler"},
    "real": {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "nodes",
        "worker",
        "extender",
        "service",
        "scheduler",
        "default-scheduler",
    },
}


@pytest.mark.parametrize(
    "control_plane", ["emulator", pytest.param("real", marks=pytest.mark.real)], ids=["emulator", "real"]
)
def test_small_demo_run_keeps_every_invariant(tmp_path: Path, control_plane: str) -> None:
    report_path = tmp_path / "report.json"
    argv = [
        sys.executable, "-m", "sim", "demo", "--nodes", "4", "--pods", "20", "--seed", "3",
        "--report", str(report_path), "--workdir", str(tmp_path / "run"), "--unschedulable-timeout", "2",
        "--timeout", "120", "--tls", "--control-plane", control_plane, "--stable", "3", "--mig-nodes", "1",
    ]  # fmt: skip
    demo = start_process(argv, log_path=tmp_path / "demo.log", cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 200
        while demo.alive():
            if time.monotonic() > deadline:
                pytest.fail(f"the demo did not finish:\n{demo.log_tail()}")
            time.sleep(0.2)
        assert demo.returncode == 0, demo.log_tail()
    finally:
        demo.stop(timeout=30)  # SIGTERM: the demo stops its children first
        leftovers = surviving_children(report_path)
        for pid in leftovers:  # only if the demo failed to: never leave them behind
            os.kill(pid, signal.SIGKILL)
    assert leftovers == []
    report = orjson.loads(report_path.read_bytes())
    assert report["exit"] == "completed"
    assert report["pods_total"] == 20 - report["pods_webhook_denied"]
    assert report["pods_bound"] + report["pods_unschedulable"] == report["pods_total"]
    assert report["pods_unschedulable"] >= 1  # the mix has pods that fit nowhere ...
    assert report["pods_by_kind"]["unfit"] == {
        "unschedulable": report["pods_by_kind"]["unfit"]["unschedulable"]
    }
    assert report["pods_bound"] >= 15  # ... and the rest fits easily on 4 x 8 GPUs
    assert report["oversubscribed_devices"] == 0 and report["misplaced_devices"] == []
    assert report["node_locks_held"] == 0
    assert report["bind_phases"] == {"success": report["pods_bound"]}
    assert report["filter_p50_ms"] > 0 and report["bind_p99_ms"] >= report["bind_p50_ms"] > 0
    assert report["pods_per_second"] > 0
    assert report["settings"]["tls"] is True
    assert report["control_plane"] == control_plane
    # the pod that asks for no managed device: left alone by the webhook, placed by the default scheduler
    assert report["plain_pod"]["pod"] == "default/demo-plain" and report["plain_pod"]["node"]
    assert report["plain_pod"]["scheduler_name"] == "default-scheduler"
    if control_plane == "real":  # kube-scheduler's own events carry our extender's reasons
        assert set(report["rejected"]) <= set(report["failed_scheduling"])
        for message in report["failed_scheduling"].values():
            assert any(reason in message for reason in HAMI_REASONS), message
        assert set(report["versions"]) == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        }
    assert set(report["child_pids"]) == CHILDREN[control_plane]
    assert len(report["child_pids"]["service"]) >= 2  # the Gunicorn master and its workers
    assert report["children_left"] == []
    time.sleep(0.1)
    assert [pid for pids in report["child_pids"].values() for pid in pids if pid_alive(pid)] == []
    log = (tmp_path / "demo.log").read_text()
    assert "pods_bound=" in log and "DEVICES" in log and "tasks" in log
    node = report["plain_pod"]["node"]
    assert f"plain pod default/demo-plain (no managed device, default-scheduler) placed on {node}" in log
