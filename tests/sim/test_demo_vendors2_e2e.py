"""`python -m sim demo` on a cluster of the vendors of vendors2 beside NVIDIA: Metax whole GPUs and sGPU,
Iluvatar, Kunlunxin XPU and vXPU, Enflame GCU and DRS nodes as their device plugins publish them, every
actor a real process. Pods of every vendor are bound and allocated by the simulated plugins, no device is
oversubscribed, no node lock is left, and the report counts the pods per vendor."""

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
MIX = "nvidia,metax,metax-sgpu,iluvatar,kunlun,kunlun-vxpu,enflame,enflame-drs"
KEYS = {"NVIDIA", "Metax-GPU", "Metax-SGPU", "BI-V150", "kunlun", "XPU", "GCU", "Enflame"}


def test_vendors2_demo_binds_every_vendor(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    argv = [
        sys.executable, "-m", "sim", "demo", "--nodes", "8", "--pods", "48", "--seed", "2", "--vendors", MIX,
        "--report", str(report_path), "--workdir", str(tmp_path / "run"), "--unschedulable-timeout", "2",
        "--timeout", "150",
    ]  # fmt: skip
    demo = start_process(argv, log_path=tmp_path / "demo.log", cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + 240
        while demo.alive():
            if time.monotonic() > deadline:
                pytest.fail(f"the demo did not finish:\n{demo.log_tail()}")
            time.sleep(0.2)
        assert demo.returncode == 0, demo.log_tail()
    finally:
        demo.stop(timeout=30)
        pids = orjson.loads(report_path.read_bytes()).get("child_pids") or {} if report_path.exists() else {}
        for pid in [p for group in pids.values() for p in group if pid_alive(p)]:
            os.kill(pid, signal.SIGKILL)
    report = orjson.loads(report_path.read_bytes())
    assert report["exit"] == "completed"
    assert report["oversubscribed_devices"] == 0 and report["misplaced_devices"] == []
    assert report["undecodable_allocations"] == [] and report["node_locks_held"] == 0
    by_vendor = report["pods_bound_by_vendor"]
    assert set(by_vendor) == KEYS, by_vendor
    assert all(count > 0 for count in by_vendor.values())
    assert report["pods_bound"] + report["pods_unschedulable"] == report["pods_total"]
    own_plugins = by_vendor["kunlun"] + by_vendor["Enflame"]  # plugins outside HAMi's protocol
    assert report["bind_phases"].get("success", 0) >= report["pods_bound"] - own_plugins
    assert report["device_plugin"]["counters"].get("allocate_failed", 0) == 0
    assert report["children_left"] == []
