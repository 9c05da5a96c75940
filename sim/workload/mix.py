"""The demo's pod mix: seeded, with exact proportions per kind (so every run at a size has the same mix).

Kinds (label `sim.hami.io/kind`):
- `fraction`: one GPU, `nvidia.com/gpumem` MiB (2–24 GiB), sometimes `gpucores`;
- `percent`: one GPU, `nvidia.com/gpumem-percentage` (10–50 %), sometimes cores;
- `multi`: 2 or 4 GPUs with memory per GPU;
- `exclusive`: `nvidia.com/gpu` only — the webhook adds `gpucores: 100` (whole cards);
- `init`: a GPU init container (data preparation) before a GPU main container;
- `sidecar`: a GPU container plus a GPU-less sidecar (before or after it);
- `unfit`: cannot fit anywhere — 16 GPUs, more memory than any card, or a GPU model nobody has.

With other vendors' nodes in the cluster, their pods join: `ascend` (1–2 Ascend 910B3 chips, a memory
template or whole chips), `ascend910c`, `ascend310p`, `hygon`, `cambricon`, `mthreads`, and `mixed` (one
container asking an NVIDIA GPU and a Hygon DCU, where nodes have both).

Some fitting pods finish after a few seconds (`sim.hami.io/run-seconds`); the rest run until deleted.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sim.kit.podutil import RUN_SECONDS

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


# Pod kinds of the other vendors, used when the cluster has their nodes (sim.nodes.vendors part names).
VENDOR_KINDS: dict[str, tuple[str, ...]] = {
    "ascend910b3": ("ascend",),
    "ascend910c": ("ascend910c",),
    "ascend310p": ("ascend310p",),
    "hygon": ("hygon",),
    "cambricon": ("cambricon",),
    "mthreads": ("mthreads",),
    "awsneuron": ("awsneuron",),
    "amd": ("amd",),
    "vastai": ("vastai",),
    "biren": ("biren",),
    **{
        part: (part,)
        for part in ("metax", "metax-sgpu", "iluvatar", "kunlun", "kunlun-vxpu", "enflame", "enflame-drs")
    },
}
VENDOR_WEIGHT = 0.08  # of all pods, per vendor pod kind
MIXED_WEIGHT = 0.04  # NVIDIA + Hygon in one container, when some node has both


# the limits of one pod of Metax, Iluvatar, Kunlunxin and Enflame, as their webhooks leave them
POD_LIMITS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "metax": lambda rng: {"metax-tech.com/gpu": rng.choice([1, 1, 2])},
    "metax-sgpu": lambda rng: rng.choice(
        [
            {
                "metax-tech.com/sgpu": 1,
                "metax-tech.com/vmemory": rng.choice([4, 8]),
                "metax-tech.com/vcore": 25,
            },
            {"metax-tech.com/sgpu": 2},  # exclusive: two cards of one MetaLink zone
        ]
    ),
    "iluvatar": lambda rng: rng.choice(
        [
            {"iluvatar.ai/BI-V150-vgpu": 1, "iluvatar.ai/BI-V150.vMem": 32, "iluvatar.ai/BI-V150.vCore": 25},
            {"iluvatar.ai/BI-V150-vgpu": 2, "iluvatar.ai/BI-V150.vCore": 200},
        ]
    ),
    "kunlun": lambda rng: {"kunlunxin.com/xpu": rng.choice([1, 2, 4])},
    "kunlun-vxpu": lambda rng: {
        "kunlunxin.com/vxpu": 1,
        "kunlunxin.com/vxpu-memory": rng.choice([24576, 49152]),
    },
    "enflame": lambda rng: {"enflame.com/gcu": rng.choice([1, 2])},
    "enflame-drs": lambda rng: {"enflame.com/drs-gcu": rng.choice([1, 3])},
}


def _vendor(rng: random.Random, kind: str) -> list[dict[str, Any]]:
    """The containers of one pod of another vendor's `kind` (values their webhooks accept)."""
    if kind in POD_LIMITS:
        return [_container("dev", POD_LIMITS[kind](rng))]
    if kind == "ascend":
        count = rng.choice([1, 1, 2])
        limits: dict[str, Any] = {"huawei.com/Ascend910B3": count}
        if count == 1 and rng.random() < 0.7:
            limits["huawei.com/Ascend910B3-memory"] = rng.choice([8000, 16384, 30000])
        return [_container("npu", limits)]
    if kind == "ascend910c":
        return [_container("npu", {"huawei.com/Ascend910C": rng.choice([1, 2])})]
    if kind == "ascend310p":
        return [_container("infer", {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": 3072})]
    if kind == "hygon":
        if rng.random() < 0.3:
            return [_container("dcu", {"hygon.com/dcunum": 1})]
        memory, cores = rng.choice([2048, 4096, 8192]), rng.choice([10, 25, 50])
        return [
            _container(
                "dcu", {"hygon.com/dcunum": 1, "hygon.com/dcumem": memory, "hygon.com/dcucores": cores}
            )
        ]
    if kind == "cambricon":
        limits = {"cambricon.com/vmlu": 1}
        if rng.random() < 0.7:
            limits.update(
                {
                    "cambricon.com/mlu.smlu.vmemory": rng.choice([8, 16, 32]),
                    "cambricon.com/mlu.smlu.vcore": 25,
                }
            )
        return [_container("mlu", limits)]
    if kind == "mthreads":
        if rng.random() < 0.3:
            return [_container("mt", {"mthreads.com/vgpu": 2})]
        return [
            _container("mt", {"mthreads.com/vgpu": 1, "mthreads.com/sgpu-memory": rng.choice([8, 16, 32])})
        ]
    if kind in VENDORS3_KINDS:
        return [VENDORS3_KINDS[kind](rng)]
    return [  # mixed: one container asking NVIDIA and Hygon devices at once
        _container(
            "both",
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096, "hygon.com/dcunum": 1, "hygon.com/dcumem": 2048},
        )
    ]


# --- AWS Neuron, AMD, Vastai, Biren (values their webhooks accept) ---


def _neuron(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.5:
        return _container("neuron", {"aws.amazon.com/neuron": rng.choice([1, 1, 2])})
    return _container("cores", {"aws.amazon.com/neuroncore": rng.choice([1, 1, 2, 4])})


def _amd(rng: random.Random) -> dict[str, Any]:
    limits: dict[str, Any] = {"amd.com/gpu": 1}
    if rng.random() < 0.7:
        limits.update(
            {"amd.com/gpumem": rng.choice([16384, 65536]), "amd.com/gpucores": rng.choice([25, 50])}
        )
    return _container("rocm", limits)


VENDORS3_KINDS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "awsneuron": _neuron,
    "amd": _amd,
    "vastai": lambda rng: _container("va", {"vastaitech.com/va": rng.choice([1, 1, 2])}),
    "biren": lambda rng: _container("br", {"birentech.com/gpu": rng.choice([1, 1, 2])}),
}
MAX_VENDOR_SHARE = 0.6  # of all pods, when many vendors are in the cluster (NVIDIA keeps the rest)


def _weights(vendors: Sequence[tuple[str, ...]]) -> dict[str, float]:
    """Per-kind weights for a cluster of these node kinds: each vendor kind present gets VENDOR_WEIGHT,
    NVIDIA's kinds share the rest (all of it without other vendors)."""
    parts = {p for kind in vendors for p in kind}
    extra = {k: VENDOR_WEIGHT for part, kinds in VENDOR_KINDS.items() if part in parts for k in kinds}
    if any("nvidia" in kind and "hygon" in kind for kind in vendors):
        extra["mixed"] = MIXED_WEIGHT
    if any("nvidia" in kind for kind in vendors) and sum(extra.values()) > MAX_VENDOR_SHARE:
        shrink = MAX_VENDOR_SHARE / sum(extra.values())
        extra = {k: w * shrink for k, w in extra.items()}
    nvidia = 1.0 - sum(extra.values()) if any("nvidia" in kind for kind in vendors) or not vendors else 0.0
    scale = nvidia / sum(WEIGHTS.values())
    return {**{k: w * scale for k, w in WEIGHTS.items() if scale > 0}, **extra}


def _counts(total: int, weights: Mapping[str, float] = WEIGHTS) -> dict[str, int]:
    """Exact per-kind counts summing to `total` (largest remainders)."""
    scale = sum(weights.values())
    raw = {k: w / scale * total for k, w in weights.items()}
    counts = {k: int(v) for k, v in raw.items()}
    for kind in sorted(raw, key=lambda k: raw[k] - counts[k], reverse=True)[: total - sum(counts.values())]:
        counts[kind] += 1
    return counts


def demo_pods(
    total: int, seed: int = 0, finishing: float = 0.15, vendors: Sequence[tuple[str, ...]] = ()
) -> list[DemoPod]:
    """`total` pods in a seeded order; a `finishing` fraction of the fitting ones runs for 4–12 s. With
    `vendors` (the cluster's node kinds, sim.nodes.vendors.parse_vendors) the other vendors' pods join the
    mix."""
    rng = random.Random(seed)
    kinds = [
        k for k, n in _counts(total, _weights(vendors) if vendors else WEIGHTS).items() for _ in range(n)
    ]
    rng.shuffle(kinds)
    pods = []
    for index, kind in enumerate(kinds):
        if kind in WEIGHTS:
            containers, init, notes = _gpu(rng, kind)
        else:
            containers, init, notes = _vendor(rng, kind), [], {}
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
