"""The real kubectl against the emulator: discovery, tables, apply, annotate/label/patch, delete --wait."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sim.emulator.testing import EmulatorHandle, node, pod, wait_for

pytestmark = pytest.mark.kubectl


class Kubectl:
    def __init__(self, binary: Path, sim: EmulatorHandle, cache: Path) -> None:
        self._base = [
            str(binary),
            f"--kubeconfig={sim.kubeconfig}",
            f"--cache-dir={cache}",
            "--request-timeout=20s",
        ]

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*self._base, *args], capture_output=True, text=True, timeout=60, check=False)
        if ok and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.out(*args, "-o", "json"))


@pytest.fixture
def kubectl(kubectl_binary: Path, sim: EmulatorHandle, tmp_path: Path) -> Kubectl:
    return Kubectl(kubectl_binary, sim, tmp_path / "kube-cache")


def _rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


def test_get_tables_and_json(sim: EmulatorHandle, kubectl: Kubectl) -> None:
    gpu = node("gpu-1", labels={"node-role.kubernetes.io/worker": ""})
    gpu["status"] = {**gpu["status"], "nodeInfo": {"kubeletVersion": "v1.35.0"}}  # type: ignore[dict-item]
    sim.seed([gpu, node("gpu-2"), pod("train", namespace="ml", node_name="gpu-1", phase="Running")])
    rows = _rows(kubectl.out("get", "nodes"))
    assert [row[:3] + row[4:] for row in rows] == [
        ["NAME", "STATUS", "ROLES", "VERSION"],
        ["gpu-1", "Ready", "worker", "v1.35.0"],
        ["gpu-2", "Ready", "<none>"],
    ]
    assert all(row[3].endswith("s") for row in rows[1:]), "AGE in seconds"
    rows = _rows(kubectl.out("get", "pods", "-A", "-o", "wide"))
    assert rows[0][:4] == ["NAMESPACE", "NAME", "READY", "STATUS"] and "NODE" in rows[0]
    assert rows[1][:4] == ["ml", "train", "0/1", "Running"] and "gpu-1" in rows[1]
    listed = kubectl.json("get", "nodes")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["gpu-1", "gpu-2"]
    assert kubectl.json("get", "node", "gpu-1")["metadata"]["labels"] == {
        "node-role.kubernetes.io/worker": ""
    }


def test_get_paginates_and_resolves_short_names(sim: EmulatorHandle, kubectl: Kubectl) -> None:
    sim.seed([pod(f"p{i}") for i in range(5)])
    assert [r[0] for r in _rows(kubectl.out("get", "po", "--chunk-size=2"))[1:]] == [
        "p0",
        "p1",
        "p2",
        "p3",
        "p4",
    ]
    assert "default" in kubectl.out("get", "ns")
    assert "No resources found" in kubectl.run("get", "leases", "-n", "kube-system").stderr


def test_apply_creates_then_updates(sim: EmulatorHandle, kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = pod("web", labels={"app": "web"})
    del manifest["status"]
    path = tmp_path / "web.json"
    path.write_text(json.dumps(manifest))
    assert kubectl.out("apply", "-f", str(path)).strip() == "pod/web created"
    assert kubectl.out("apply", "-f", str(path)).strip() == "pod/web unchanged"
    manifest["metadata"]["labels"] = {"app": "web", "tier": "front"}  # type: ignore[index]
    path.write_text(json.dumps(manifest))
    assert kubectl.out("apply", "-f", str(path)).strip() == "pod/web configured"
    stored = sim.get("pods", "web", "default")
    assert stored is not None and stored["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    assert [c["name"] for c in stored["spec"]["containers"]] == ["main"]


def test_annotate_label_and_patch(sim: EmulatorHandle, kubectl: Kubectl) -> None:
    sim.seed([node("n1")])
    kubectl.run("annotate", "node", "n1", "hami.io/node-handshake=Requesting_2026")
    kubectl.run("label", "node", "n1", "gpu=on")
    assert kubectl.run("label", "node", "n1", "gpu=off", ok=False).returncode != 0, "needs --overwrite"
    kubectl.run("label", "node", "n1", "gpu=off", "--overwrite")
    kubectl.run("patch", "node", "n1", "--type", "merge", "-p", '{"metadata":{"labels":{"merge":"yes"}}}')
    kubectl.run(
        "patch",
        "node",
        "n1",
        "--type",
        "json",
        "-p",
        '[{"op":"add","path":"/metadata/labels/json","value":"yes"}]',
    )
    kubectl.run("patch", "node", "n1", "-p", '{"spec":{"unschedulable":true}}')
    kubectl.run("annotate", "node", "n1", "hami.io/node-handshake-")
    stored = sim.get("nodes", "n1")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"gpu": "off", "merge": "yes", "json": "yes"}
    assert stored["metadata"]["annotations"] == {}
    assert stored["spec"] == {"unschedulable": True}
    assert "Ready,SchedulingDisabled" in kubectl.out("get", "node", "n1")
    failed = kubectl.run(
        "patch",
        "node",
        "n1",
        "--type",
        "json",
        "-p",
        '[{"op":"test","path":"/spec/unschedulable","value":false}]',
        ok=False,
    )
    assert failed.returncode == 1 and failed.stderr.startswith("The request is invalid")


def test_delete_waits_for_graceful_pod_deletion(sim: EmulatorHandle, kubectl: Kubectl) -> None:
    sim.seed([pod("p", node_name="n1", phase="Running"), node("n1")])
    assert "deleted" in kubectl.out("delete", "pod", "p", "--timeout=20s")
    assert sim.get("pods", "p", "default") is None, "kubectl returned only once the pod was gone"
    kubectl.run("delete", "node", "n1")
    assert sim.get("nodes", "n1") is None


def test_errors_read_like_a_real_server(kubectl: Kubectl) -> None:
    missing = kubectl.run("get", "node", "nope", ok=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): nodes "nope" not found'
    unknown = kubectl.run("get", "deployments", ok=False)
    assert unknown.returncode == 1 and "the server doesn't have a resource type" in unknown.stderr


def test_get_watch_prints_table_rows(sim: EmulatorHandle, kubectl_binary: Path, tmp_path: Path) -> None:
    sim.seed([node("n1")])
    argv = [str(kubectl_binary), f"--kubeconfig={sim.kubeconfig}", f"--cache-dir={tmp_path / 'cache'}"]
    watcher = subprocess.Popen(
        [*argv, "get", "nodes", "-w", "--output-watch-events", "--request-timeout=2s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: sim.stats()["watchers"] == 1, 10, "kubectl to start watching")
        label = {"metadata": {"labels": {"node-role.kubernetes.io/gpu": ""}}}
        sim.call("PATCH", "/api/v1/nodes/n1", label, content_type="application/merge-patch+json")
        stdout, stderr = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.communicate()
    rows = [row[:4] for row in _rows(stdout)]
    assert rows == [
        ["EVENT", "NAME", "STATUS", "ROLES"],
        ["ADDED", "n1", "Ready", "<none>"],
        ["MODIFIED", "n1", "Ready", "gpu"],
    ], stderr
