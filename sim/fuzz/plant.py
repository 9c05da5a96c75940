"""The fuzzer's corrupt cluster state, planted in the API emulator while requests run.

What HAMi's other writers (the device plugin, old schedulers, a human with kubectl, a forger) could leave on
nodes and pods: register annotations that do not decode (not JSON, negative counts, duplicate UUIDs, wrong
types) or decode to 10,000 devices, pair-score garbage, lock values that are not HAMi's format or name
impossible times, pods whose allocation annotations are garbage or name unknown UUIDs, forged allocations
on pods of another scheduler, and ResourceQuotas with absurd GPU limits. `Planter.plant` creates the fixed
set once; `Planter.churn` changes one thing (a lock on a good node, a bad node's registration) between
requests, so the worker and the service keep re-reading corrupt objects.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.kit.kube import Kube, KubeError, node_path, pod_path

REGISTER = "hami.io/node-nvidia-register"
PAIR_SCORE = "hami.io/node-nvidia-score"
LOCK = "hami.io/mutex.lock"
ASSIGNED_NODE = "hami.io/vgpu-node"
ALLOCATED = "hami.io/vgpu-devices-allocated"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
BAD_PREFIX = "fuzz-bad-"
NAMESPACE = "default"
QUOTA_NAMESPACE = "fuzz-quota"  # absurd quotas here, so the valid flows in NAMESPACE still fit


def _device(uuid: str, count: Any = 10, devmem: Any = 32768, **extra: Any) -> dict[str, Any]:
    device = {"id": uuid, "count": count, "devmem": devmem, "devcore": 100, "type": "NVIDIA-FUZZ"}
    return {**device, "health": True, **extra}


def corrupt_registers(rng: random.Random) -> list[str]:
    """Register annotation values a node must be excluded for (with a reason), never poisoning others."""
    dup = _device("GPU-dup")
    return [
        "garbage",
        "",
        "[",
        "{}",
        "null",
        '"a string"',
        "[1, 2]",
        json.dumps([_device("GPU-neg", count=-5)]),
        json.dumps([_device("GPU-negmem", devmem=-32768)]),
        json.dumps([dup, dup]),
        json.dumps([_device("GPU-type", count="10")]),
        json.dumps([_device("GPU-float", devmem=1.5)]),
        json.dumps([_device("GPU-big", devmem=2**40)]),
        '[{"id": "GPU-bigint", "count": 10, "devmem": ' + "9" * 5000 + "}]",
        json.dumps([_device("")]),
        json.dumps([_device("GPU-health", health="yes")]),
        json.dumps([_device("GPU-mig", migProfiles=[{"name": 5, "placements": "x"}])]),
        json.dumps([{"ID": "GPU-case", "COUNT": 10, "count": "x"}]),
        "GPU-legacy,10,32768,100,NVIDIA,0,true:GPU-bad,x,1,1,N,0,maybe:",
        "GPU-legacy,10,32768,100,NVIDIA,0,true,-1,hami-core:",
        "GPU-l," + "9" * 5000 + ",1,1,NVIDIA,0,true:",
        "[" * 5000 + "]" * 5000,
        json.dumps([_device(f"GPU-{rng.getrandbits(32):08x}\u202e\u0000")]),
    ]


PAIR_SCORES = ("garbage", "[{}]", '[{"uuid": 5, "score": "x"}]', "null", '{"a": {"b": "c"}}', "[" * 3000)


def lock_values(now: datetime) -> list[str]:
    """`hami.io/mutex.lock` values HAMi's format does not expect; binds on the node must still resolve."""
    future = (now + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        "lock",
        "a,b",
        "2024-01-01T00:00:00Z,a,b,c",
        "",
        ",,",
        "\u0000",
        "x" * 10_000,
        "1970-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z,default,ghost",
        "0001-01-01T00:00:00+01:00,default,ghost",
        "9999-12-31T23:59:59-23:59,default,ghost",
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59Z,default,ghost",
        f"{future},default,ghost",
        future,
        "2024-13-45T99:99:99Z,default,ghost",
        "2024-01-01t00:00:00z,default,ghost",
    ]


def allocations(uuids: list[str]) -> list[str]:
    """`hami.io/vgpu-devices-allocated` values that are garbage or name devices nobody registered."""
    good = uuids[0] if uuids else "GPU-none"
    return [
        "garbage",
        "",
        ";;;;",
        ",,,:",
        "GPU-unknown-0000,NVIDIA,1000,10:;",
        f"{good},NVIDIA,-5,10:;",
        f"{good},NVIDIA,99999999999,10:;",
        f"{good},NVIDIA,1000,-100:;",
        f"{good},NVIDIA,1000,10:{good},NVIDIA,1000,10:;",
        f"{good},NVIDIA," + "9" * 5000 + ",10:;",
        f"{good},AMD,1000,10:;",
        "x" * 10_000,
    ]


def quota(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": QUOTA_NAMESPACE},
        "spec": {"hard": limits},
    }


@dataclass
class Planter:
    """Plants and churns corrupt objects; `good_nodes` are the simulated nodes (their kubelets run)."""

    kube: Kube
    rng: random.Random
    good_nodes: list[str]
    uuids: list[str]
    bad_nodes: list[str] = field(default_factory=list)
    planted: dict[str, int] = field(default_factory=dict)

    def _count(self, what: str) -> None:
        self.planted[what] = self.planted.get(what, 0) + 1

    def _node(self, name: str, annotations: dict[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name},
                "annotations": annotations,
            },
        }
        self.kube.create(node_path(), body)
        status = {
            "allocatable": {"nvidia.com/gpu": "10"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        self.kube.patch(node_path(name, "status"), {"status": status})
        self.bad_nodes.append(name)
        self._count("nodes")

    def _pod(self, name: str, node: str, scheduler: str, annotations: dict[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node,
                "containers": [
                    {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
        }
        self.kube.create(pod_path(NAMESPACE), body)
        self.kube.patch(pod_path(NAMESPACE, name, "status"), {"status": {"phase": "Running"}})
        self._count("pods")

    def plant(self) -> None:
        """The fixed corrupt set: one bad node per register corruption, garbage pods and quotas."""
        for position, register in enumerate(corrupt_registers(self.rng)):
            self._node(f"{BAD_PREFIX}{position:02d}", {REGISTER: register})
        huge = [_device(f"GPU-huge-{i:05d}", count=1, devmem=1) for i in range(10_000)]
        self._node(f"{BAD_PREFIX}huge", {REGISTER: json.dumps(huge, separators=(",", ":"))})
        for position, score in enumerate(PAIR_SCORES):
            register = json.dumps([_device(f"GPU-s{position}")])
            self._node(f"{BAD_PREFIX}score-{position}", {REGISTER: register, PAIR_SCORE: score})
        for position, value in enumerate(allocations(self.uuids)):
            node = self.good_nodes[position % len(self.good_nodes)]
            annotations = {ASSIGNED_NODE: node, ALLOCATED: value, TO_ALLOCATE: ""}
            self._pod(f"fuzz-corrupt-{position}", node, "hami-scheduler", annotations)
            forged = {ASSIGNED_NODE: node, ALLOCATED: f"{self.uuids[0]},NVIDIA,30000,100:;"}
            self._pod(f"fuzz-forged-{position}", node, "default-scheduler", forged)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": QUOTA_NAMESPACE}}
        self.kube.create("/api/v1/namespaces", namespace)
        for position, value in enumerate(["-5", "0x10", "1e400", "99999999999999999999Gi", "NaN", ""]):
            self.kube.create(
                f"/api/v1/namespaces/{QUOTA_NAMESPACE}/resourcequotas",
                quota(f"fuzz-quota-{position}", {"limits.nvidia.com/gpumem": value}),
            )
            self._count("quotas")

    def churn(self) -> str:
        """One change: a lock value on a good node, or a new corrupt registration on a bad node."""
        try:
            if self.rng.random() < 0.6:
                node = self.rng.choice(self.good_nodes)
                value = self.rng.choice(lock_values(datetime.now(UTC)))
                self.kube.patch(node_path(node), {"metadata": {"annotations": {LOCK: value}}})
                self._count("locks")
                return f"lock {value[:60]!r} on {node}"
            node = self.rng.choice(self.bad_nodes)
            register = self.rng.choice(corrupt_registers(self.rng))
            self.kube.patch(node_path(node), {"metadata": {"annotations": {REGISTER: register}}})
            self._count("registrations")
            return f"register {register[:60]!r} on {node}"
        except KubeError as exc:
            return f"churn failed: {exc}"
