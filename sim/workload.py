"""The demo's pod mix: seeded, with exact proportions per kind (so every run at a size has the same mix).

Kinds (label `sim.hami.io/kind`):
- `fraction`: one GPU, `nvidia.com/gpumem` MiB (2–24 GiB), sometimes `gpucores`;
- `percent`: one GPU, `nvidia.com/gpumem-percentage` (10–50 %), sometimes cores;
- `multi`: 2 or 4 GPUs with memory per GPU;
- `exclusive`: `nvidia.com/gpu` only — the webhook adds `gpucores: 100` (whole cards);
- `init`: a GPU init container (data preparation) before a GPU main container;
- `sidecar`: a GPU container plus a GPU-less sidecar (before or after it);
- `unfit`: cannot fit anywhere — 16 GPUs, more memory than any card, or a GPU model nobody has.

Some fitting pods finish after a few seconds (`sim.hami.io/run-seconds`); the rest run until deleted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sim.podutil import RUN_SECONDS

KIND_LABEL = "sim.hami.io/kind"
DEMO_LABEL = "sim.hami.io/demo"
NAMESPACES = ("default", "ml-team")
IMAGE = "registry.local/cuda-app:12.4"
WEIGHTS: dict[str, float] = {
    "fraction": 0.30,
    "percent": 0.14,
    "multi": 0.12,
    "exclusive": 0.14,
    "init": 0.10,
    "sidecar": 0.12,
    "unfit": 0.08,
}


@dataclass(frozen=True)
class DemoPod:
    kind: str
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        meta = self.manifest["metadata"]
        return f"{meta['namespace']}/{meta['name']}"


def _container(name: str, limits: dict[str, Any], cpu: str = "1", memory: str = "4Gi") -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": dict(limits)},
    }


def _gpu(rng: random.Random, kind: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """(containers, init containers, extra annotations) of one pod of `kind`."""
    cores = rng.choice([0, 0, 10, 20, 30, 50])
    if kind == "fraction":
        limits: dict[str, Any] = {
            "nvidia.com/gpu": 1,
            "nvidia.com/gpumem": rng.choice([2048, 4096, 8192, 12288, 16384, 24576]),
        }
        if cores:
            limits["nvidia.com/gpucores"] = cores
        return [_container("train", limits)], [], {}
    if kind == "percent":
        limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": rng.choice([10, 20, 25, 50])}
        if cores:
            limits["nvidia.com/gpucores"] = min(cores, 25)
        return [_container("infer", limits)], [], {}
    if kind == "multi":
        limits = {
            "nvidia.com/gpu": rng.choice([2, 2, 4]),
            "nvidia.com/gpumem": rng.choice([8192, 16384, 20480]),
        }
        if rng.random() < 0.4:
            limits["nvidia.com/gpucores"] = 20
        return [_container("ddp", limits, cpu="4", memory="32Gi")], [], {}
    if kind == "exclusive":
        return (
            [_container("bench", {"nvidia.com/gpu": rng.choice([1, 1, 2])}, cpu="8", memory="64Gi")],
            [],
            {},
        )
    if kind == "init":
        init = _container("prepare", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096}, cpu="500m")
        main = _container("train", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": rng.choice([8192, 16384])})
        return [main], [init], {}
    if kind == "sidecar":
        main = _container("serve", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": rng.choice([6144, 10240])})
        side = _container("proxy", {}, cpu="100m", memory="128Mi")
        return ([side, main] if rng.random() < 0.5 else [main, side]), [], {}
    variant = rng.choice(["too-many", "too-much-memory", "no-such-model"])
    if variant == "too-many":
        return [_container("huge", {"nvidia.com/gpu": 16, "nvidia.com/gpumem": 1024})], [], {}
    if variant == "too-much-memory":
        return [_container("huge", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100_000})], [], {}
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}
    return [_container("picky", limits)], [], {"nvidia.com/use-gputype": "B200"}


def _counts(total: int) -> dict[str, int]:
    """Exact per-kind counts summing to `total` (largest remainders)."""
    raw = {k: w * total for k, w in WEIGHTS.items()}
    counts = {k: int(v) for k, v in raw.items()}
    for kind in sorted(raw, key=lambda k: raw[k] - counts[k], reverse=True)[: total - sum(counts.values())]:
        counts[kind] += 1
    return counts


def demo_pods(total: int, seed: int = 0, finishing: float = 0.15) -> list[DemoPod]:
    """`total` pods in a seeded order; a `finishing` fraction of the fitting ones runs for 4–12 s."""
    rng = random.Random(seed)
    kinds = [k for k, n in _counts(total).items() for _ in range(n)]
    rng.shuffle(kinds)
    pods = []
    for index, kind in enumerate(kinds):
        containers, init, notes = _gpu(rng, kind)
        if kind != "unfit" and rng.random() < finishing:
            notes[RUN_SECONDS] = str(rng.randint(4, 12))
        spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Never"}
        if init:
            spec["initContainers"] = init
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{kind}-{index + 1:03d}",
                "namespace": NAMESPACES[index % len(NAMESPACES)],
                "labels": {KIND_LABEL: kind, DEMO_LABEL: "true"},
                "annotations": notes,
            },
            "spec": spec,
        }
        pods.append(DemoPod(kind, manifest))
    return pods
