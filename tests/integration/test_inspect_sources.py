"""`hami-scheduler inspect` from its three sources shows what the pods' annotations say.

A cluster on the API emulator with a real Gunicorn service and registration worker: pods filtered, bound
and allocated by the simulated device plugin, one pod filtered but not bound yet (reserved), one that
finished. `inspect` reads (1) the live API through the kubeconfig, (2) a dump written by the real
`kubectl get nodes,pods,resourcequotas -A -o json`, (3) the replica's /debug/state. Each must show per
device exactly the memory, cores and slots — and the pods — that the `hami.io/vgpu-devices-allocated`
annotations add up to, parsed here independently of the scheduler's codec.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.kubectl]

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"
NODES = ("gpu-i0", "gpu-i1")
PODS = {  # name -> (gpus, memory MiB, cores)
    "one": (1, 3000, 20),
    "two": (2, 8000, 0),
    "three": (1, 12000, 50),
    "four": (1, 1000, 10),
}
Usage = dict[str, dict[str, Any]]


def expected_usage(pods: list[dict[str, Any]]) -> Usage:
    """Per device UUID: memory, cores, slots and the pods, from the allocation annotations (HAMi's
    `uuid,type,mem,cores:` per device, `;` between containers) of pods that hold devices."""
    usage: Usage = {}
    for pod in pods:
        meta = pod["metadata"]
        encoded = (meta.get("annotations") or {}).get("hami.io/vgpu-devices-allocated")
        if not encoded or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in encoded.split(";"):
            for device in filter(None, container.split(":")):
                uuid, _type, mem, cores = device.split(",")
                entry = usage.setdefault(uuid, {"memory": 0, "cores": 0, "slots": 0, "pods": set()})
                entry["memory"] += int(mem)
                entry["cores"] += int(cores)
                entry["slots"] += 1
                entry["pods"].add(f"{meta['namespace']}/{meta['name']}")
    return usage


def inspected(*args: str) -> Usage:
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "inspect", *args, "-o", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    usage: Usage = {}
    for node in json.loads(result.stdout)["nodes"]:
        for d in node["devices"]:
            if d["slots"]["used"]:
                usage[d["uuid"]] = {
                    "memory": d["memory_mib"]["used"],
                    "cores": d["cores"]["used"],
                    "slots": d["slots"]["used"],
                    "pods": {f"{p['namespace']}/{p['name']}" for p in d["pods"]},
                }
    return usage


@pytest.fixture(scope="module")
def placed(start_service: Any, cluster: Any, emulator: Any, wait_for: Any) -> tuple[Any, list[str]]:
    emulator.reset()
    cluster.add_nodes(*(cluster.gpu_node(name, gpus=2) for name in NODES))
    service = start_service(workers=2)
    wait_for(lambda: all(service.debug_state(n)["registered"] for n in NODES), 15, "nodes registered")
    names = []
    for name, (gpus, memory, cores) in PODS.items():
        pod = cluster.create_pod(cluster.gpu_pod(name, gpus=gpus, memory=memory, cores=cores or None))
        (node,) = service.filter(pod, list(NODES))["NodeNames"]
        if name != "four":  # "four" stays filtered but unbound: a reservation in flight
            assert service.bind(cluster.pod(name), node) == {"Error": ""}
            cluster.allocate(node)
        names.append(name)
    return service, names


def test_every_source_shows_the_annotations(placed: Any, cluster: Any, emulator: Any, tmp_path: Path) -> None:
    service, names = placed
    pods = [cluster.pod(name) for name in names]
    expected = expected_usage(pods)
    assert (
        sum(e["slots"] for e in expected.values()) == 5
        and len({p for e in expected.values() for p in e["pods"]}) == 4
    )

    live = inspected("--kubeconfig", str(emulator.kubeconfig))
    assert live == expected

    if not KUBECTL.exists():
        pytest.fail(f"kubectl is missing at {KUBECTL}: run `make tools` first")
    dump = subprocess.run(
        [
            str(KUBECTL),
            "--kubeconfig",
            str(emulator.kubeconfig),
            "get",
            "nodes,pods,resourcequotas",
            "-A",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    (tmp_path / "cluster.json").write_text(dump, encoding="utf-8")
    assert inspected("--cluster", str(tmp_path / "cluster.json")) == expected

    # The replica's ledger: the same allocations (the reserved pod included, as its filter recorded it).
    assert inspected("--url", service.url) == expected


def test_a_finished_pod_frees_its_devices_in_every_source(
    placed: Any, cluster: Any, emulator: Any, wait_for: Any
) -> None:
    service, names = placed
    cluster.core.patch_namespaced_pod_status("one", "default", {"status": {"phase": "Succeeded"}})
    expected = expected_usage([cluster.pod(name) for name in names])
    assert all("default/one" not in e["pods"] for e in expected.values())
    assert inspected("--kubeconfig", str(emulator.kubeconfig)) == expected
    wait_for(lambda: inspected("--url", service.url) == expected, 15, "the replica's ledger to drop the pod")
