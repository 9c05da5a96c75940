"""`python -m sim demo` on mixed clusters (what `make demo` runs), every actor a real process: NVIDIA, Ascend
910B3 and 910C, Hygon beside NVIDIA, Cambricon and Moore Threads nodes; and NVIDIA beside Metax (GPU, sGPU),
Iluvatar, Kunlunxin (XPU, vXPU) and Enflame (GCU, DRS) nodes; and every one of the 13 vendors on the real
control plane (the chart's `devices.<vendor>.enabled`, the real kube-scheduler with the chart's
managedResources, the real webhook). Pods of every vendor are bound, no device of any vendor is
oversubscribed, no node lock is left, and the report counts them per vendor."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from sim.cluster.stack import pid_alive
from sim.emulator.testing import REPO_ROOT
from sim.kit.processes import start_process

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Mix:
    vendors: str
    nodes: int
    pods: int
    seed: int
    keys: frozenset[str]
    own_plugins: frozenset[str]  # vendors whose plugins do not set HAMi's bind phases
    control_plane: str = "emulator"


MIXES = [
    pytest.param(
        Mix(
            "nvidia,ascend910b3,nvidia+hygon,cambricon,nvidia,mthreads,ascend910c", 7, 40, 1,
            frozenset({"NVIDIA", "Ascend910B3", "Ascend910C", "DCU", "MLU", "Mthreads"}),
            frozenset({"MLU", "Mthreads"}),
        ),
        id="ascend-hygon-cambricon-mthreads",
    ),
    pytest.param(
        Mix(
            "nvidia,metax,metax-sgpu,iluvatar,kunlun,kunlun-vxpu,enflame,enflame-drs", 8, 48, 2,
            frozenset({"NVIDIA", "Metax-GPU", "Metax-SGPU", "BI-V150", "kunlun", "XPU", "GCU", "Enflame"}),
            frozenset({"kunlun", "Enflame"}),
        ),
        id="metax-iluvatar-kunlun-enflame",
    ),
    pytest.param(
        Mix(
            "nvidia,ascend910b3,nvidia+hygon,cambricon,nvidia,mthreads,ascend910c,awsneuron+amd,vastai+biren,"
            "metax+iluvatar,metax-sgpu,kunlun+enflame,kunlun-vxpu+enflame-drs", 13, 110, 0,
            frozenset({
                "NVIDIA", "Ascend910B3", "Ascend910C", "DCU", "MLU", "Mthreads", "AWSNeuron", "AMD", "Vastai",
                "Biren", "Metax-GPU", "Metax-SGPU", "BI-V150", "kunlun", "XPU", "GCU", "Enflame",
            }),
            frozenset({"MLU", "Mthreads", "kunlun", "Enflame", "AWSNeuron"}),
            "real",
        ),
        id="all-13-vendors-real-control-plane",
        marks=pytest.mark.real,
    ),
]  # fmt: skip


@pytest.mark.parametrize("mix", MIXES)
def test_mixed_demo_binds_every_vendor(tmp_path: Path, mix: Mix, from_image: str) -> None:
    """With --from-image, the real control plane's mix runs our containers from that image."""
    report_path = tmp_path / "report.json"
    image = ["--from-image", from_image] if from_image and mix.control_plane == "real" else []
    argv = [
        sys.executable, "-m", "sim", "demo", "--nodes", str(mix.nodes), "--pods", str(mix.pods),
        "--seed", str(mix.seed), "--vendors", mix.vendors,
        "--report", str(report_path), "--workdir", str(tmp_path / "run"), "--unschedulable-timeout", "2",
        "--timeout", "150", "--control-plane", mix.control_plane, *image,
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
    assert set(by_vendor) == mix.keys, by_vendor
    assert all(count > 0 for count in by_vendor.values())
    assert report["pods_bound"] + report["pods_unschedulable"] == report["pods_total"]
    hami_plugins = report["pods_bound"] - sum(by_vendor[key] for key in mix.own_plugins)
    assert report["bind_phases"].get("success", 0) >= hami_plugins  # their plugins set HAMi's phases
    assert report["device_plugin"]["counters"].get("allocate_failed", 0) == 0
    assert report["children_left"] == []
    printed = (tmp_path / "demo.log").read_text(encoding="utf-8", errors="replace")
    assert "bound by vendor: " + "  ".join(f"{k}={v}" for k, v in by_vendor.items()) in printed
