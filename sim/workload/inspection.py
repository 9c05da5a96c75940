"""What the pods' allocation annotations add up to per device, and what `hami-scheduler inspect` shows.

Why: the acceptance of the inspector is that it shows the same allocations as the API, from every source
(a live cluster, a `kubectl get` dump, a replica's /debug/state) and on every control plane (the emulator,
the real kube-apiserver). The expected side is parsed here from HAMi's `hami.io/vgpu-devices-allocated`
(`uuid,type,mem,cores:` per device, `;` between containers) independently of the scheduler's codec, so a
bug in the codec cannot hide on both sides.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
KUBECTL = REPO_ROOT / ".tools" / "bin" / "kubectl"  # `make tools`
ALLOCATED = "hami.io/vgpu-devices-allocated"
Usage = dict[str, dict[str, Any]]  # device UUID -> memory (MiB), cores, slots, pods {namespace/name}


def expected_usage(pods: Iterable[Mapping[str, Any]]) -> Usage:
    """Per device UUID: memory, cores, slots and the pods, from the annotations of pods that hold devices
    (an allocation and not finished)."""
    usage: Usage = {}
    for pod in pods:
        meta = pod["metadata"]
        encoded = (meta.get("annotations") or {}).get(ALLOCATED)
        if not encoded or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
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


def inspected(*args: str, timeout: float = 120) -> Usage:
    """`python -m app.cli inspect ARGS -o json` reduced to the devices in use; AssertionError when it fails
    or writes to stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "inspect", *args, "-o", "json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
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


def kubectl_dump(kubeconfig: Path, path: Path, kubectl: Path = KUBECTL) -> Path:
    """The dump `inspect --cluster` reads, written by the real `kubectl get nodes,pods,resourcequotas -A -o
    json` to `path` (`kubectl`: the control plane's own, `ControlPlane.kubectl()`; by default the one `make
    tools` installs); AssertionError when kubectl is missing."""
    assert kubectl.exists(), f"kubectl is missing at {kubectl}: run `make tools` (or `make kube`) first"
    argv = [
        str(kubectl),
        "--kubeconfig",
        str(kubeconfig),
        "get",
        "nodes,pods,resourcequotas",
        "-A",
        "-o",
        "json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    path.write_text(done.stdout, encoding="utf-8")
    return path
